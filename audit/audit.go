package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Depth is how far into the table an audit reads.
type Depth int

const (
	// DepthLedger reads snapshot summaries (and their ranges files) only.
	DepthLedger Depth = iota + 1
	// DepthFiles also reads manifests, but no data file. It is the default.
	DepthFiles
	// DepthRows also reads the partition and offset columns of every live
	// data file (floe audit --deep).
	DepthRows
)

// Level names the level of the audit that made a finding.
type Level string

// The levels, cheapest first.
const (
	LevelLedger  Level = "ledger"
	LevelFiles   Level = "files"
	LevelRows    Level = "rows"
	LevelBroker  Level = "broker"
	LevelContent Level = "content"
)

func (l Level) order() int {
	return slices.Index([]Level{LevelLedger, LevelFiles, LevelRows, LevelBroker, LevelContent}, l)
}

// Kind says what a finding is. Kinds are part of the JSON schema.
type Kind string

const (
	// KindGap (ledger): offsets between the first and the next offset that
	// no range covers.
	KindGap Kind = "gap"
	// KindOverlap (ledger): offsets that more than one range covers.
	KindOverlap Kind = "overlap"
	// KindLost (ledger): offsets the sink recorded as deleted by retention
	// before they were sunk (--on-data-loss record).
	KindLost Kind = "lost"

	// KindForeignFile (files): a live data file added by a snapshot that is
	// not a floe commit; its rows are not explained by the ledger.
	KindForeignFile Kind = "foreign-file"
	// KindMissingFile (files): a data file a floe commit added is no longer
	// live (deleted or overwritten since). In a state table, whose commits
	// replace files, only a removal by a snapshot that is not a floe commit.
	KindMissingFile Kind = "missing-file"
	// KindStrayFile (files): a data file of a floe commit that does not lie
	// inside one range of that commit (rows outside its ranges, or rows of
	// several partitions outside a file group), or a file group whose span
	// no range of its commit covers. In a state table: outside the
	// partition's coverage up to the end of that commit's range.
	KindStrayFile Kind = "stray-file"
	// KindCountMismatch (files, rows): the rows of a range differ from the
	// record count the ledger gives it. In a state table: more rows than
	// records (a partition's live files, or a range's distinct offsets).
	KindCountMismatch Kind = "count-mismatch"
	// KindDeleteFiles (files): row-level delete files hide rows of the table.
	KindDeleteFiles Kind = "delete-files"
	// KindDeadLettersPending (ledger): a commit's dead letters are in no row
	// of its dead-letter table yet, and the files it lists are there: its
	// writer stopped between the commit and adding them (or a rollback
	// that removed them was undone). The next sink session, or floe
	// maintain, adds them. (When the files are gone too, nothing can add
	// them: KindMissingFile.)
	KindDeadLettersPending Kind = "dead-letters-pending"
	// KindStrayDeadLetters (ledger): a dead-letter table of the table holds
	// dead letters of commits no branch's or tag's ledger has (the table was
	// rolled back past them, or a published branch replaced them),
	// whatever the ledger names. The next sink session, or floe maintain,
	// removes them.
	KindStrayDeadLetters Kind = "stray-dead-letters"
	// KindDeadLettersLost (ledger): dead letters of a commit that floe
	// maintain --drop-missing-dead-letter-files recorded as lost (their
	// files are gone, so nothing can add them): the offsets are neither
	// rows nor dead letters. Only a replay of the table brings them back.
	KindDeadLettersLost Kind = "dead-letters-lost"

	// KindDuplicate (rows; content without the rows level): offsets held
	// by more than one row.
	KindDuplicate Kind = "duplicate"
	// KindOutsideLedger (rows): rows whose offsets no (non-lost) range covers.
	KindOutsideLedger Kind = "outside-ledger"
	// KindFileContent (rows): a data file whose rows disagree with its
	// manifest entry (row count, partition or offset bounds): the file was
	// altered after it was committed.
	KindFileContent Kind = "file-content"
	// KindDuplicateKey (rows, state tables): rows holding a key that a row
	// at a higher offset of the same partition holds too.
	KindDuplicateKey Kind = "duplicate-key"
	// KindNullKey (rows, state tables): rows with a null key, which a state
	// table drops.
	KindNullKey Kind = "null-key"

	// KindUnrecordedLoss (broker): the partition's log starts above the
	// ledger's next offset: retention deleted offsets before they were sunk
	// and the ledger does not record it.
	KindUnrecordedLoss Kind = "unrecorded-loss"
	// KindRetainedLoss (broker): the ledger records offsets as deleted by
	// retention before they were sunk (lost, or aborted records deleted),
	// but the log still retains them: the sink records such a range only
	// below the log start, which never moves back, so the ledger was
	// written by something else (or the topic was recreated), and the
	// records are not in the table.
	KindRetainedLoss Kind = "retained-loss"
	// KindUnseenPartition (broker): a partition of the topic holding offsets
	// that the ledger has never seen.
	KindUnseenPartition Kind = "unseen-partition"
	// KindBeyondEnd (broker): the ledger covers offsets at or above the
	// partition's high watermark (topic recreated, or another cluster).
	KindBeyondEnd Kind = "beyond-end"
	// KindMissingPartition (broker): a partition of the ledger that the
	// broker does not have (topic deleted, or another cluster).
	KindMissingPartition Kind = "missing-partition"
	// KindUnrecordedStart (broker): the partition's first sunk offset lies
	// inside the retained log, and the ledger does not record that a
	// writer started the partition there: offsets below it may have been
	// skipped (a --start latest sink that was restarted before floe
	// recorded start positions).
	KindUnrecordedStart Kind = "unrecorded-start"
	// KindTopicRecreated (ledger, broker): the ledger recorded more than one
	// Kafka topic ID for a topic (ledger), or another ID than the broker's
	// topic of that name (broker): the topic was deleted and recreated, or
	// this is another cluster, so the ledger's offsets do not name its
	// records.
	KindTopicRecreated Kind = "topic-recreated"

	// KindMissingRow (content): a committed record inside a range has no row.
	// In a state table: the latest committed record of its key inside the
	// ranges, not a tombstone, has no row.
	KindMissingRow Kind = "missing-row"
	// KindContentMismatch (content): a row's key, value, headers or
	// timestamp differ from its record in the log.
	KindContentMismatch Kind = "content-mismatch"
	// KindUnexpectedRow (content): a row at an offset that holds no
	// committed record (a transaction marker, an aborted record, or a record
	// of a transaction still open); in a state table also a row at a
	// tombstone or at a record without a key.
	KindUnexpectedRow Kind = "unexpected-row"
	// KindSupersededRow (content, state tables): a row whose key has a later
	// committed record inside the ranges (a new value or a tombstone) that
	// the fold did not apply.
	KindSupersededRow Kind = "superseded-row"
	// KindUnclassified (content): an offset inside a range that has no row
	// and that the log does not explain as a marker, an aborted record or a
	// compacted one (a record of a transaction still open, or a control
	// record of an unknown type).
	KindUnclassified Kind = "unclassified"
	// KindUnclassifiedHole (content): offsets inside a range that have no
	// record in the retained log although the topic's cleanup.policy does
	// not include compact: retention removes records from the start of the
	// log only, so nothing explains them. Rows there cannot be verified.
	KindUnclassifiedHole Kind = "unclassified-hole"
)

// Finding is one thing the audit could not account for.
type Finding struct {
	Level Level
	Kind  Kind
	// Partition is the partition concerned when HasPartition. Its Topic is
	// empty when the partition number is known but not the topic (a file
	// of a table holding several topics).
	Partition    mapping.TopicPartition
	HasPartition bool
	// Offsets are the offsets concerned when HasOffsets.
	Offsets    mapping.Interval
	HasOffsets bool
	// Others are the other partitions the finding concerns, when it is
	// about the ranges of several partitions together (a file group's
	// files hold their rows together, so which partition lost rows is not
	// known), or, without a Partition, about a whole topic's (recreated):
	// each counts the finding among its own.
	Others []mapping.TopicPartition
	// File is the data file concerned, if any; SnapshotID the snapshot.
	File       string
	SnapshotID int64
	// Detail says what is wrong in one sentence.
	Detail string
	// Key is the key of an upsert table that Detail names (keyPhrase),
	// "" when it names none: the text and HTML reports show it as floe
	// where --key takes it (textDetail).
	Key string
}

// keyPhrase names key in a finding's Detail, quoted as a Go string: the
// JSON report has always given it so, and accepted findings are matched
// by their JSON (findingKey).
func keyPhrase(key string) string { return fmt.Sprintf("key %q", key) }

// textDetail is f.Detail as a person reads it: its key as floe where
// --key takes it, in a shell's single quotes, not escaped as a Go string
// (key "{\"id\":1}" could not be pasted: a new user's report).
func (f Finding) textDetail() string {
	if f.Key == "" {
		return f.Detail
	}
	return strings.Replace(f.Detail, keyPhrase(f.Key), "key '"+strings.ReplaceAll(f.Key, "'", `'\''`)+"'", 1)
}

// BrokerState is a partition as the broker reports it.
type BrokerState struct {
	LogStart, LastStable, HighWatermark int64
	// Lag is the number of retained offsets, up to the last stable offset,
	// that the ledger does not cover yet: LastStable - max(next, LogStart),
	// never negative.
	Lag int64
	// PastReplayEnd, for a partition of a replay's target (Report.ReplayEnd),
	// counts the retained offsets past the end the replay recorded: a
	// bounded replay never takes them, so they are not Lag, which counts
	// those up to that end only.
	PastReplayEnd int64
}

// ContentStats counts what the content level saw in the retained part of
// a partition's ledger coverage.
type ContentStats struct {
	// Verified rows matched their record's digest.
	Verified int64
	// Markers, Aborted and Compacted count offsets inside a range that hold
	// no row, by cause.
	Markers, Aborted, Compacted int64
	// Folded counts, in a state table, committed records inside a range that
	// rightly have no row: superseded by a later record of their key,
	// tombstones and the records they delete, records without a key.
	Folded int64
	// Unverifiable rows have no record left in the log to compare with
	// (compacted or deleted after they were sunk).
	Unverifiable int64
	// DeadLetters are dead letters that matched their record's bytes.
	DeadLetters int64
}

// PartitionReport is the audit of one partition.
type PartitionReport struct {
	mapping.TopicPartition
	// InLedger is false for a partition only the broker knows.
	InLedger bool
	// First is the lowest offset the ledger covers, Next the offset after
	// the highest; Ranges and Records count the ranges and their rows.
	First, Next int64
	Ranges      int
	Records     int64
	// DeadLetters counts the records the ledger's ranges sent to the
	// dead-letter table instead of rows; DeadLettersRead the dead letters
	// read there (rows level).
	DeadLetters, DeadLettersRead int64
	// Deletes and Skipped count the records the ledger's ranges applied as
	// deletes and skipped (records without a key): an upsert or state
	// table's, beside Records, its upserts.
	Deletes, Skipped int64
	// LedgerRanges are the partition's ranges as the ledger holds them, in
	// commit order (the HTML report draws them); nil for a partition only
	// the broker knows. The slice is shared with the audit: do not modify.
	LedgerRanges []mapping.Range
	// Gaps, Overlaps and Lost are the ledger's findings, merged and sorted.
	Gaps, Overlaps, Lost []mapping.Interval
	// Aborted are offsets deleted by retention before they were sunk that
	// held only aborted records (not findings).
	Aborted []mapping.Interval
	// Started is set when the ledger records where a sink began the
	// partition (mapping.Coverage.Started).
	Started bool
	// Files is the number of live data files attributed to the partition
	// (files level).
	Files int
	// Rows is the number of rows read (rows level), -1 when not read.
	Rows int64
	// Broker is nil without a broker; Content nil without --verify-content.
	Broker  *BrokerState
	Content *ContentStats
	// Findings counts the findings about this partition at every level.
	Findings int
}

// Evidence identifies exactly what was audited.
type Evidence struct {
	// Digest is "sha256:" and the hex SHA-256 of Canonical(report's table
	// metadata location, ledger); recomputing it proves that a later
	// audit saw the same ledger in the same metadata version.
	Digest           string
	MetadataLocation string
	SnapshotID       int64
	Commits          int
}

// Report is the outcome of an audit.
type Report struct {
	Table  string
	Branch string
	// Tag is set when Branch names a tag (snapshot.Table.OnTag).
	Tag bool
	// CatalogArgs are the command-line flags that name the table's
	// catalog when it is not the default one, for the command the HTML
	// report gives to audit the table again; the caller sets them.
	CatalogArgs []string `json:"-"`
	// Mode is the table's mode (snapshot.Table.Mode); the files, rows and
	// content levels check the invariants of its kind of table (see
	// docs/audit.md).
	Mode mapping.Mode
	// Fold is the table's floe.fold property: empty but for a state table
	// (mapping.ModeFold), where it is mapping.FoldLatest.
	Fold string
	// UpsertKey is an upsert table's key (mapping.UpsertKey's text form),
	// empty for other tables.
	UpsertKey string
	// Levels are the levels that ran, cheapest first.
	Levels []Level
	// Brokers are the seed brokers the broker and content levels read, and
	// ClusterID the id their cluster gave (empty when it gave none): the
	// log the table was checked against. BrokersSource says where the
	// caller took the brokers from when not from a flag (an environment
	// variable, a config file); the caller sets it.
	Brokers       []string
	ClusterID     string
	BrokersSource string `json:"-"`
	Partitions    []PartitionReport
	// Findings are sorted by partition, level and offset. The table is
	// complete when there are none.
	Findings []Finding
	// Accepted are findings that an earlier report listed too, set aside by
	// Accept: Complete and the partitions' counts leave them out.
	// AcceptedFrom names that report; it is empty when Accept did not run.
	Accepted     []Finding
	AcceptedFrom string
	// ReplayFrom is the time a replay --from a time began the audited
	// table or branch with (replay.FromTimeKey), empty when none did.
	// ReplayEnd is the table property holding the end offsets of the
	// replay the audited table or branch is the target of
	// (replay.UntilKey), empty when it is no replay's: its partitions stop
	// there.
	ReplayFrom, ReplayEnd string
	// Notes are facts worth knowing that are not findings.
	Notes    []string
	Evidence Evidence
	// Files is the number of live data files, RowsRead the rows read by the
	// rows and content levels, each row counted once though both read it,
	// DeadLettersRead the dead-letter tables' rows the rows level read.
	Files           int
	RowsRead        int64
	DeadLettersRead int64
	Started         time.Time
	Duration        time.Duration
}

// Complete reports whether the audit found nothing.
func (r *Report) Complete() bool { return len(r.Findings) == 0 }

// Progress receives the advance of the row and content levels.
type Progress interface {
	Add(n int64)
	Finish()
}

// Options configure Run.
type Options struct {
	// Depth is how far into the table to read; zero means DepthFiles.
	Depth Depth
	// Topic restricts the audit to one topic of the ledger; empty means all.
	Topic string
	// Broker, when set, adds the broker level.
	Broker *connector.Broker
	// VerifyContent re-reads the retained log and compares every record
	// with its row, or its dead letter. It needs Broker, and Registry for a
	// table that decodes with a schema registry: a typed table's records
	// are decoded as the sink decodes them, and compared with the rows.
	VerifyContent bool
	Registry      *connector.Registry
	// Progress, when set, is called when the row or content level starts,
	// with a description and the total units (rows, offsets) to do.
	Progress func(desc string, total int64) Progress
	// Concurrency bounds the data files read at once; zero means GOMAXPROCS.
	Concurrency int
	// contentWindow, when positive, replaces maxDigestsAhead as the
	// offsets of a content window (tests).
	contentWindow int64
	// keepNoRanges, set by tests, takes the path of a ledger longer than
	// keepRangesMax whatever its length.
	keepNoRanges bool
}

// ErrNoLedger is matched (errors.Is) when a table has no floe ledger.
var ErrNoLedger = errors.New("no floe ledger")

// NoLedgerError reports a table whose branch has no floe commit: floe never
// wrote it, or its ledger was expired away.
type NoLedgerError struct {
	Table, Branch string
	// Snapshots is the number of snapshots in the table's metadata.
	Snapshots int
	// DeadLettersOf is the table whose dead-letter table this is, if it
	// is one (snapshot.PropDeadLettersOf).
	DeadLettersOf string
}

func (e *NoLedgerError) Error() string {
	if e.DeadLettersOf != "" {
		return fmt.Sprintf("table %s is the dead-letter table of %s and has no ledger of its own: audit %s, whose audit counts its dead letters against this table (--deep reads them)",
			e.Table, e.DeadLettersOf, e.DeadLettersOf)
	}
	if e.Snapshots == 0 {
		return fmt.Sprintf("table %s has no ledger to audit: branch %s has no snapshot yet (floe sink has not committed to it)", e.Table, e.Branch)
	}
	return fmt.Sprintf("table %s has no ledger to audit: none of its %d snapshots on branch %s carries floe ledger properties (the table was not written by floe sink, or its floe snapshots were expired)",
		e.Table, e.Snapshots, e.Branch)
}

func (e *NoLedgerError) Is(target error) bool { return target == ErrNoLedger }

// AuditedSnapshotExpiredError reports that the snapshot an audit read was
// expired while the audit read its files, which the expiry deleted: the
// files the audit found missing are not lost rows, and the audit says
// nothing. Auditing again reads the table's current snapshot.
type AuditedSnapshotExpiredError struct {
	Table      string
	SnapshotID int64
	// Missing is the number of files the audit found missing, none of
	// which the branch's head references; Err the error of a level that
	// could not read a file of the snapshot, if one failed.
	Missing int
	Err     error
	// Ledger are the findings of the ledger level, which read no file of
	// the snapshot (a dead-letter table lost): they stand whatever
	// expired.
	Ledger []Finding
}

func (e *AuditedSnapshotExpiredError) Error() string {
	what := fmt.Sprintf("%d of its files were deleted with it: they are not lost rows", e.Missing)
	if e.Err != nil {
		what = fmt.Sprintf("its files were deleted with it (%v)", e.Err)
	}
	msg := fmt.Sprintf("audit %s: snapshot %d, which the audit read, was expired while it read the table's files (by floe maintain or a sink's own maintenance, after a compaction replaced them), and %s; run the audit again, which reads the current snapshot",
		e.Table, e.SnapshotID, what)
	if len(e.Ledger) > 0 {
		var ds []string
		for _, f := range e.Ledger[:min(len(e.Ledger), 3)] {
			ds = append(ds, fmt.Sprintf("%s: %s", f.Kind, f.Detail))
		}
		msg += fmt.Sprintf("; its ledger level found, whatever expired, %d: %s", len(e.Ledger), strings.Join(ds, "; "))
	}
	return msg
}

func (e *AuditedSnapshotExpiredError) Unwrap() error { return e.Err }

// ErrTopicNotInLedger is matched (errors.Is) when Options.Topic has no
// range in the table's ledger. It says nothing about the brokers: a topic
// that does not exist there is connector.ErrUnknownTopic.
var ErrTopicNotInLedger = errors.New("topic not in the ledger")

// Run audits tbl as last loaded (call Refresh first to audit the latest
// metadata). Findings are not errors: an error means the audit could not
// run, and is a *NoLedgerError, a *mapping.MalformedError, a
// *mapping.RangesFileError (a commit's ranges file is missing or is not
// the one its snapshot references), an ErrTopicNotInLedger, an
// *AuditedSnapshotExpiredError, or a failure to read the table or the
// broker.
func Run(ctx context.Context, tbl *snapshot.Table, opts Options) (*Report, error) {
	if opts.Depth == 0 {
		opts.Depth = DepthFiles
	}
	if opts.Depth < DepthLedger || opts.Depth > DepthRows {
		return nil, fmt.Errorf("audit %s: unknown depth %d", tbl.Name(), opts.Depth)
	}
	if opts.VerifyContent && opts.Broker == nil {
		return nil, errors.New("content verification re-reads the log: it needs a broker (Options.Broker)")
	}
	mode := tbl.Mode()
	a := &auditor{
		tbl:      tbl,
		opts:     opts,
		keySeeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		parts:    map[mapping.TopicPartition]*PartitionReport{},
		tpIDs:    map[mapping.TopicPartition]int32{},
		rep: &Report{
			Table:   tbl.Name(),
			Branch:  tbl.Branch(),
			Tag:     tbl.OnTag(),
			Mode:    mode,
			Started: time.Now().UTC(),
		},
	}
	switch mode {
	case mapping.ModeAppend:
	case mapping.ModeFold:
		a.fold, a.rep.Fold = mapping.FoldLatest, mapping.FoldLatest
	case mapping.ModeUpsert:
		var err error
		if a.upsert, err = newUpsertTable(tbl); err != nil {
			return nil, err
		}
		a.rep.UpsertKey = a.upsert.key.String()
	default:
		return nil, fmt.Errorf("audit %s: a table of mode %s, which this floe does not audit", tbl.Name(), mode)
	}
	if err := a.loadLedger(ctx); err != nil {
		return nil, err
	}

	if err := a.openDeadLetters(ctx); err != nil {
		return nil, err
	}
	if err := a.ledgerLevel(ctx); err != nil {
		return nil, err
	}
	if opts.Depth >= DepthFiles {
		if err := a.filesLevel(ctx); err != nil {
			return nil, a.expiredOr(ctx, err)
		}
	}
	if opts.Depth >= DepthRows {
		if err := a.rowsLevel(ctx); err != nil {
			return nil, a.expiredOr(ctx, err)
		}
	}
	if opts.Broker != nil {
		if err := a.brokerLevel(ctx); err != nil {
			return nil, err
		}
	}
	a.noteBegan()
	if opts.VerifyContent {
		if err := a.contentLevel(ctx); err != nil {
			return nil, a.expiredOr(ctx, err)
		}
		a.rep.RowsRead = max(a.rep.RowsRead, a.contentRows)
		a.rep.DeadLettersRead = max(a.rep.DeadLettersRead, a.contentDeadLetters)
	}
	if err := a.checkSnapshotLive(ctx); err != nil {
		return nil, err
	}
	a.finish()
	return a.rep, nil
}

// checkSnapshotLive returns an *AuditedSnapshotExpiredError when the audit
// found files of its snapshot missing, the table, loaded again, no longer
// has that snapshot, and its branch's head references none of them: a long
// audit beside a compaction and an expiry reads a snapshot whose replaced
// files the expiry deleted. While the snapshot is live, no expiry deletes
// its files; a file the head still references is lost whatever expired:
// they are findings.
func (a *auditor) checkSnapshotLive(ctx context.Context) error {
	var missing []string
	for _, f := range a.rep.Findings {
		// Files the storage lost, which the rows level finds: the
		// ledger level's (a dead-letter table's) are never the data
		// table's snapshot's.
		if f.Kind == KindMissingFile && f.Level == LevelRows {
			missing = append(missing, f.File)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	expired, err := a.snapshotExpired(ctx, missing)
	if err != nil || !expired {
		return err
	}
	e := &AuditedSnapshotExpiredError{Table: a.tbl.Name(), SnapshotID: a.headID, Missing: len(missing)}
	for _, f := range a.rep.Findings {
		if f.Level == LevelLedger {
			e.Ledger = append(e.Ledger, f)
		}
	}
	return e
}

// expiredOr returns err, a level's failure, or an
// *AuditedSnapshotExpiredError wrapping it when it is a file of the
// audited snapshot gone (a manifest or data file) because an expiry
// removed the snapshot meanwhile.
func (a *auditor) expiredOr(ctx context.Context, err error) error {
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if expired, cerr := a.snapshotExpired(ctx, nil); cerr != nil || !expired {
		return err
	}
	return &AuditedSnapshotExpiredError{Table: a.tbl.Name(), SnapshotID: a.headID, Err: err}
}

// snapshotExpired reports whether the table, loaded again, no longer has
// the audited snapshot and its branch's head references none of files.
func (a *auditor) snapshotExpired(ctx context.Context, files []string) (bool, error) {
	if a.headID == 0 {
		return false, nil
	}
	now, err := snapshot.Open(ctx, a.tbl.Catalog(), a.tbl.Identifier(), snapshot.OpenOptions{Branch: a.tbl.Branch(), ReadTag: a.tbl.OnTag()})
	if err != nil {
		return false, fmt.Errorf("audit %s: reload the table to tell missing files from an expiry: %w", a.tbl.Name(), err)
	}
	if now.Iceberg().Metadata().SnapshotByID(a.headID) != nil {
		return false, nil
	}
	if head := now.Head(); head != nil && len(files) > 0 {
		data, err := now.Files(ctx, head.SnapshotID)
		if err != nil {
			return false, fmt.Errorf("audit %s: list the files of the head to tell missing files from an expiry: %w", a.tbl.Name(), err)
		}
		deletes, err := now.DeleteFiles(ctx, head.SnapshotID)
		if err != nil {
			return false, fmt.Errorf("audit %s: list the delete files of the head to tell missing files from an expiry: %w", a.tbl.Name(), err)
		}
		live := map[string]bool{}
		for _, f := range data {
			live[f.Path] = true
		}
		for _, f := range deletes {
			live[f.Path] = true
		}
		if slices.ContainsFunc(files, func(p string) bool { return live[p] }) {
			return false, nil
		}
	}
	return true, nil
}

// auditor carries one audit's state across its levels.
type auditor struct {
	tbl  *snapshot.Table
	opts Options
	rep  *Report
	// fold is the table's floe.fold: "" for an event table, otherwise the
	// table is a state table and the files, rows and content levels check a
	// state table's invariants (state.go). keySeeds hash its keys.
	fold     string
	keySeeds [2]maphash.Seed
	// upsert is set for an upsert table (upsert.go), upFold at its content
	// level; tpIndex numbers the partitions its keyed rows name (tpID).
	upsert *upsertTable
	upFold *upsertFold
	// upCommits indexes the ledger's ranges by commit for an upsert
	// table's content level (built as the ledger is read).
	upCommits commitIndex
	// stale counts, at the content level, the keys whose latest record is
	// a dead letter, and the first of those records (staleKey).
	stale struct {
		keys  int
		first position
	}
	// decodable counts, at the content level, the dead letters whose
	// records decode now as the sink would decode them into a row (a
	// schema the registry lacked then, a column widened since).
	decodable counted
	// untold counts, at the content level, the dead letters of an upsert
	// table keyed by decoded columns whose key cannot be told: the row of
	// their key may be stale.
	untold counted
	// placeholders counts, at the content level, the rows an older floe
	// made of events holding Debezium's unchanged-TOAST placeholder.
	placeholders counted
	tpIndex      []mapping.TopicPartition
	tpIDs        map[mapping.TopicPartition]int32

	headID int64
	// sum summarises the ledger and cover holds each partition's
	// coverage, from one read of it (loadLedger). No level holds the
	// whole ledger: commits holds the commits of the live files only
	// (files level), ranges holds each partition's ranges in commit order
	// only for a small ledger, the levels that check every range's counts
	// (rows, content) read the ledger again (eachCommit), and an upsert
	// table's content level indexes the ranges by commit (upCommits).
	sum   mapping.Summary
	cover map[mapping.TopicPartition]*mapping.Coverer
	// deadNames are the dead-letter tables the ledger names, and
	// deadCommits the commits that name one.
	deadNames   map[string]bool
	deadCommits []mapping.Commit
	// deadUnnamed are the commits whose ranges count dead letters but
	// that name no dead-letter table (snapshot id and count): floe's sink
	// never writes one.
	deadUnnamed [][2]int64
	// topics are the ledger's topics, sorted; single is the only topic
	// when there is one (it names the topic of partition numbers read
	// from files).
	topics []string
	single string
	// fromTimeKey is the table property that records the time a replay
	// --from a time began the audited branch with (Report.ReplayFrom):
	// the ledger level reads it (replayFrom).
	fromTimeKey string
	// began are the partitions the ledger records a start past offset 0
	// of (a sink's or a replay's), and retained the offsets below that
	// start the broker retains: one note names them all (noteBegan).
	began    []mapping.TopicPartition
	retained map[mapping.TopicPartition]mapping.Interval
	// replayEnd is the end offsets the replay the audited table or branch
	// is the target of recorded (replay.UntilKey), nil when none.
	replayEnd mapping.Cut
	// foreign is set when a live data file was added by a snapshot that is
	// not a floe commit (files level): its rows may claim any topic.
	foreign bool
	// ranges holds each partition's ranges in commit order.
	ranges map[mapping.TopicPartition][]mapping.Range
	// commits indexes the ledger by snapshot id.
	commits map[int64]*mapping.Commit
	parts   map[mapping.TopicPartition]*PartitionReport
	// files are the live data files at the head (files level).
	files []snapshot.DataFile
	// deadTables are the table's dead-letter tables (those the ledger
	// names, and the others it has), by name, and deadAt the offsets of
	// the dead letters read in those the ledger names (rows level).
	// contentRows counts the rows the content level read, and
	// contentDeadLetters the dead letters, which the rows level, when it
	// ran, read and counted too.
	contentRows, contentDeadLetters int64
	deadTables                      map[string]*deadLetterTable
	deadAt                          map[mapping.TopicPartition]*offsetSet
	// deadBad are the commits whose dead letters have a finding of the
	// ledger or files level already (missing, pending, miscounted).
	deadBad map[int64]bool
	// typed decodes records for the content level of a typed table.
	typed *typedContent
	// chains places compacted files on the ledger (compactedFiles).
	chains *chains
	// compactedGroups are the file groups of floe's compactions, by data
	// file path, placed on the ledger once per group (compactedGroup).
	compactedGroups map[string]*placedGroup
	// groupsRead are the compactions whose groups compactedGroups holds.
	groupsRead map[int64]bool
}

// keepRangesMax is the size of ledger (in ranges) up to which the report
// carries every partition's ranges (PartitionReport.LedgerRanges, which
// the HTML report draws) when the levels run need only the streamed
// ledger.
const keepRangesMax = 100_000

// loadLedger reads the ledger once, commit after commit: the summary, each
// partition's coverage, the evidence digest and the dead-letter tables
// named. The ledger and files levels need nothing more, so an audit of
// those holds no range (beyond a small ledger's, for the report); nor do
// the rows and content levels, which find where rows and dead letters may
// be in the coverage (Coverer.Kept, WithDeadLetters) and read the ledger
// again to check each range's counts; an upsert table's content level,
// which folds keys by the commits that hold their records, indexes the
// ranges by commit as they are read (upCommits: interval, counts and
// commit, not the commits). A state table's levels need no more either:
// its files level places files by the commits that added them and the
// partitions' coverage, and its fold checks keys from the rows.
func (a *auditor) loadLedger(ctx context.Context) error {
	name := a.tbl.Name()
	if head := a.tbl.Head(); head != nil {
		a.headID = head.SnapshotID
	}
	sum, err := a.tbl.Summary(ctx, a.headID)
	if err != nil {
		return fmt.Errorf("read the ledger of %s: %w", name, err)
	}
	if sum.Commits == 0 {
		n := 0
		if a.headID != 0 {
			n = len(a.tbl.Iceberg().Metadata().Snapshots())
		}
		return &NoLedgerError{Table: name, Branch: a.tbl.Branch(), Snapshots: n,
			DeadLettersOf: a.tbl.Iceberg().Properties()[snapshot.PropDeadLettersOf]}
	}
	a.sum = sum
	if a.upsert != nil && a.opts.VerifyContent {
		a.upCommits = commitIndex{}
	}
	total := 0
	for _, p := range sum.Parts {
		total += p.Ranges
	}
	keep := total <= keepRangesMax && !a.opts.keepNoRanges
	if keep {
		a.ranges = map[mapping.TopicPartition][]mapping.Range{}
	}
	a.cover = map[mapping.TopicPartition]*mapping.Coverer{}
	a.deadNames = map[string]bool{}
	ev := newEvidenceHash(a.tbl.Iceberg().MetadataLocation())
	i := 0
	for c, err := range a.tbl.Commits(ctx, a.headID) {
		if err != nil {
			return fmt.Errorf("read the ledger of %s: %w", name, err)
		}
		ev.add(c)
		if a.upCommits != nil {
			a.upCommits.add(i, c)
		}
		i++
		for _, r := range c.Ranges {
			cv := a.cover[r.TopicPartition]
			if cv == nil {
				cv = &mapping.Coverer{}
				a.cover[r.TopicPartition] = cv
			}
			cv.Add(r)
			if keep {
				a.ranges[r.TopicPartition] = append(a.ranges[r.TopicPartition], r)
			}
		}
		if n := deadLetterCount(c); n > 0 && c.DeadLetterTable == "" && a.selectedCommit(c) {
			a.deadUnnamed = append(a.deadUnnamed, [2]int64{c.SnapshotID, n})
		}
		if c.DeadLetterTable != "" {
			a.deadNames[c.DeadLetterTable] = true
			a.deadCommits = append(a.deadCommits, c)
		}
	}
	a.rep.Evidence = ev.evidence(a.headID)
	a.upCommits.sorted()
	a.topics = sum.Topics()
	if len(a.topics) == 1 {
		a.single = a.topics[0]
	}
	if t := a.opts.Topic; t != "" {
		if !slices.Contains(a.topics, t) {
			return fmt.Errorf("audit %s: %w: the ledger has no range of topic %q (it has %s)",
				name, ErrTopicNotInLedger, t, strings.Join(a.topics, ", "))
		}
		a.single = t
	}
	return nil
}

// indexCommits indexes commits by snapshot id (a.commits).
func (a *auditor) indexCommits(cs []mapping.Commit) {
	a.commits = make(map[int64]*mapping.Commit, len(cs))
	for i := range cs {
		a.commits[cs[i].SnapshotID] = &cs[i]
	}
}

// eachCommit calls fn with every commit of the ledger, oldest first, read
// again from the table.
func (a *auditor) eachCommit(ctx context.Context, fn func(mapping.Commit)) error {
	for c, err := range a.tbl.Commits(ctx, a.headID) {
		if err != nil {
			return fmt.Errorf("read the ledger of %s: %w", a.tbl.Name(), err)
		}
		fn(c)
	}
	return nil
}

// commitsAddedBy makes a.commits hold the commits of the snapshots in
// want, reading only the archive blocks that hold them.
func (a *auditor) commitsAddedBy(ctx context.Context, want map[int64]bool) error {
	var cs []mapping.Commit
	for c, err := range a.tbl.CommitsOf(ctx, a.headID, want) {
		if err != nil {
			return fmt.Errorf("read the ledger of %s: %w", a.tbl.Name(), err)
		}
		cs = append(cs, c)
	}
	a.indexCommits(cs)
	return nil
}

// floeCommit reports whether snapshot id is a commit of the ledger, from
// a.commits or the table's history.
func (a *auditor) floeCommit(id int64) bool {
	return a.commits[id] != nil || a.tbl.IsFloeCommit(id)
}

// selected reports whether the audit covers topic.
func (a *auditor) selected(topic string) bool {
	return a.opts.Topic == "" || topic == a.opts.Topic
}

// selectedTopics are the ledger topics the audit covers.
func (a *auditor) selectedTopics() []string {
	if a.opts.Topic != "" {
		return []string{a.opts.Topic}
	}
	return a.topics
}

// byTopic reports whether the rows and content levels tell rows apart by
// their topic column, not only by partition number: the ledger has several
// topics, or another writer's files are live, whose rows may claim a topic
// the ledger does not have.
func (a *auditor) byTopic() bool { return len(a.topics) > 1 || a.foreign }

// topicOf names the topic of a partition number read from a file, or ""
// when the ledger has several topics and the audit covers all of them.
func (a *auditor) topicOf(partition int32) mapping.TopicPartition {
	return mapping.TopicPartition{Topic: a.single, Partition: partition}
}

// part returns the report of tp, creating one for a partition outside the
// ledger.
func (a *auditor) part(tp mapping.TopicPartition) *PartitionReport {
	p := a.parts[tp]
	if p == nil {
		p = &PartitionReport{TopicPartition: tp, Rows: -1}
		a.parts[tp] = p
	}
	return p
}

func (a *auditor) addLevel(l Level) { a.rep.Levels = append(a.rep.Levels, l) }

// counted counts records and keeps the position of the first counted.
type counted struct {
	n     int64
	first position
}

func (c *counted) add(p position) {
	if c.n == 0 {
		c.first = p
	}
	c.n++
}

// staleKey counts a key whose latest record in the log is a dead letter at
// p, for the content level's note.
func (a *auditor) staleKey(p position) {
	if a.stale.keys == 0 || p.tp.Compare(a.stale.first.tp) < 0 || (p.tp == a.stale.first.tp && p.offset < a.stale.first.offset) {
		a.stale.first = p
	}
	a.stale.keys++
}

func (a *auditor) note(format string, args ...any) {
	a.rep.Notes = append(a.rep.Notes, fmt.Sprintf(format, args...))
}

// find records a finding. Findings about a topic the audit does not cover
// are dropped.
func (a *auditor) find(f Finding) {
	if f.HasPartition && f.Partition.Topic != "" && !a.selected(f.Partition.Topic) {
		return
	}
	a.rep.Findings = append(a.rep.Findings, f)
}

// progress starts progress reporting, or returns a no-op.
func (a *auditor) progress(desc string, total int64) Progress {
	if a.opts.Progress == nil {
		return nopProgress{}
	}
	return a.opts.Progress(desc, total)
}

type nopProgress struct{}

func (nopProgress) Add(int64) {}
func (nopProgress) Finish()   {}

// finish sorts the report and counts findings per partition.
func (a *auditor) finish() {
	r := a.rep
	for _, tp := range slices.SortedFunc(maps.Keys(a.parts), mapping.TopicPartition.Compare) {
		if a.selected(tp.Topic) {
			r.Partitions = append(r.Partitions, *a.parts[tp])
		}
	}
	slices.SortStableFunc(r.Findings, compareFindings)
	count := map[mapping.TopicPartition]int{}
	for _, f := range r.Findings {
		if f.HasPartition {
			count[f.Partition]++
		}
		// A finding of a whole topic names its partitions here alone.
		for _, o := range f.Others {
			count[o]++
		}
	}
	for i := range r.Partitions {
		r.Partitions[i].Findings = count[r.Partitions[i].TopicPartition]
	}
	r.Duration = time.Since(r.Started)
}

func compareFindings(a, b Finding) int {
	if a.HasPartition != b.HasPartition {
		if a.HasPartition {
			return -1
		}
		return 1
	}
	return cmp.Or(
		a.Partition.Compare(b.Partition),
		cmp.Compare(a.Level.order(), b.Level.order()),
		cmp.Compare(a.Offsets.Low, b.Offsets.Low),
		cmp.Compare(a.Offsets.High, b.Offsets.High),
		cmp.Compare(a.File, b.File),
	)
}
