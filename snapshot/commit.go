package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
)

// ErrFenced is matched (errors.Is) by a *FencedError.
var ErrFenced = errors.New("fenced")

// FencedError reports that another writer advanced one of this writer's
// partitions since this writer read the ledger: this writer is a zombie for
// that partition. Nothing it committed is in the ledger; the caller must
// re-read the ledger and re-seek. Its files were dropped, unless Kept.
type FencedError struct {
	Table     string
	Partition mapping.TopicPartition
	// Low is where this writer's range started, Next where the ledger now is.
	Low, Next int64
	// Vanished is set when the partition is no longer in the ledger at all
	// (the table was rolled back, or a branch was published over it); Next
	// is then meaningless.
	Vanished bool
	// Kept is the snapshot of this very commit when it landed (its answer
	// lost) and was then rolled back: that snapshot still names the
	// commit's files, so they stay, for expiry to collect with it.
	Kept int64
	// Failed is the last error of this writer's attempts that failed
	// otherwise than by losing the catalog's race (the catalog or the
	// storage unreachable), when one did before the fence was seen: a
	// writer whose commits cannot land is fenced by one whose can, which
	// says nothing of its own health.
	Failed error
}

func (e *FencedError) Error() string {
	var msg string
	if e.Vanished {
		msg = fmt.Sprintf("fenced on table %s: %s is no longer in the ledger (the table was rolled back, or a branch was published over it) while this writer was committing it from offset %d",
			e.Table, e.Partition, e.Low)
	} else {
		msg = fmt.Sprintf("fenced on table %s: another writer moved %s to offset %d while this one was committing from %d",
			e.Table, e.Partition, e.Next, e.Low)
	}
	if e.Kept != 0 {
		msg += fmt.Sprintf(" (the commit had landed as snapshot %d, its answer lost, and the branch was moved off it: its files stay with that snapshot)", e.Kept)
	}
	return msg
}

func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// withFailure records in err, when it is a *FencedError, failed: the last
// of the writer's own attempts that failed otherwise than by a lost race
// (FencedError.Failed).
func withFailure(err, failed error) error {
	if f, ok := errors.AsType[*FencedError](err); ok && failed != nil {
		f.Failed = failed
	}
	return err
}

// discarded reports whether err, a commit's outcome, leaves the files it
// wrote to be deleted: it never landed, because another writer fenced it,
// the schema they were written for moved or the catalog refused it, and
// no snapshot names them.
func discarded(err error) bool {
	if f, ok := errors.AsType[*FencedError](err); ok {
		return f.Kept == 0
	}
	if _, refused := errors.AsType[*CommitRefusedError](err); refused {
		return true
	}
	return errors.Is(err, ErrSchemaMoved) && !errors.Is(err, errKept)
}

// CommitRefusedError reports a commit that the catalog refused (its user
// lacks a privilege: catalog.IsRefused) at an attempt after none whose
// outcome is unknown: nothing of it was applied, and its files were
// deleted.
type CommitRefusedError struct {
	Table, Commit string
	Err           error
}

func (e *CommitRefusedError) Error() string {
	return fmt.Sprintf("commit %s to %s: the catalog refused the commit, nothing was committed: %v", e.Commit, e.Table, e.Err)
}

func (e *CommitRefusedError) Unwrap() error { return e.Err }

// errKept marks the ErrSchemaMoved of a commit whose files a rolled-back
// snapshot of it still names: they stay.
var errKept = errors.New("its files stay with a snapshot of this commit that was rolled back")

// Flush is what one commit writes: rows per partition and the ranges they
// come from. Every partition with rows must have a range; ranges without
// rows (only markers, aborted records, or a recorded loss) are fine. Each
// batch of a partition is written to files of its own (but an upsert's
// small partitions', which share a file group: writeUpsertFiles): a writer
// that cuts a partition's rows where its ranges are cut (at a recorded
// loss) keeps every data file inside one range, as the file-level audit
// expects.
type Flush struct {
	Batches map[mapping.TopicPartition][]arrow.RecordBatch
	Ranges  []mapping.Range
	// TopicIDs are the Kafka topic IDs the ranges were read from, by topic
	// (mapping.FormatTopicID); a topic without one is not recorded. A
	// commit whose topic ID differs from the one the ledger recorded for
	// the topic is refused with a *TopicIDError.
	TopicIDs map[string]string
	// Schema, for a table of a typed layout, is the schema the batches were
	// built for (their Arrow columns carry its names; field IDs do not
	// matter). The commit evolves the table's schema to take them (columns
	// and nested fields added, promotions) in the same snapshot as the
	// data, so that no data file ever has columns the table does not have.
	// Nil for a raw layout.
	Schema *iceberg.Schema
	// Files, instead of Batches, are the data files a Writer (Writer) wrote
	// for the flush's rows as they were consumed, by partition: the commit
	// writes nothing, and returns ErrSchemaMoved (removing them) when the
	// schema or partition spec changed since so that they no longer fit.
	Files  map[mapping.TopicPartition][]iceberg.DataFile
	Writer *Writer
	// Finished is how long the Writer took to finish the files (closing
	// its streams, writing a lane), which Result.WriteTime counts.
	Finished time.Duration
	// Groups are data files the Writer wrote that hold rows of several
	// partitions (a lane of small partitions), each with the spans of
	// Ranges whose rows it holds: the commit records them as the ledger's
	// file groups (mapping.Commit.FileGroups). Every span lies inside a
	// range of the flush that produced rows; a range's rows are in its
	// partition's Files or in one group, never both.
	Groups []WrittenGroup
	// DeadLetters are the dead-letter rows of records that could not
	// become rows (mapping.NewDeadLetterBuilder), by partition, one batch
	// per range; Ranges count them as DeadLetters. They go to
	// CommitOptions.DeadLetters.
	DeadLetters map[mapping.TopicPartition][]arrow.RecordBatch
	// Deletes, for an upsert table, are the offsets of the rows in
	// Batches, by partition, whose record deletes its key (a tombstone)
	// instead of upserting it: such a row gives its key columns only.
	// Ranges count them as Deletes.
	Deletes map[mapping.TopicPartition][]int64
	// Truncated, for an upsert table, is by partition the offset of the
	// flush's last record that truncated the table (mapping.ChangeTruncate):
	// the commit deletes every row committed before it, and the flush's
	// rows of that partition below the offset. Rows of other partitions
	// in the flush stay (Kafka orders nothing across partitions). Ranges
	// count a truncate as a delete.
	Truncated map[mapping.TopicPartition]int64
}

// WrittenGroup is a file group a Writer wrote: files that together hold the
// rows of Spans, and no other rows.
type WrittenGroup struct {
	Files []iceberg.DataFile
	Spans []mapping.Span
}

// DataFiles returns every data file a Writer wrote for the flush: its
// partitions' Files and its Groups'.
func (f Flush) DataFiles() []iceberg.DataFile {
	var out []iceberg.DataFile
	for _, fs := range f.Files {
		out = append(out, fs...)
	}
	for _, g := range f.Groups {
		out = append(out, g.Files...)
	}
	return out
}

// fileGroups returns the ledger's file groups of f's Groups that have files.
func (f Flush) fileGroups() []mapping.FileGroup {
	var out []mapping.FileGroup
	for _, g := range f.Groups {
		if len(g.Files) == 0 {
			continue
		}
		fg := mapping.FileGroup{Spans: g.Spans}
		for _, df := range g.Files {
			fg.Files = append(fg.Files, df.FilePath())
		}
		out = append(out, fg)
	}
	return out
}

// TopicIDError reports a topic whose ID differs from the one the ledger
// recorded: the topic was deleted and recreated under the same name (or
// this is another cluster), so the ledger's offsets do not name its
// records.
type TopicIDError struct {
	Table, Topic string
	// Ledger is the ID the ledger recorded, Broker the topic's ID now.
	Ledger, Broker string
}

func (e *TopicIDError) Error() string {
	return fmt.Sprintf("topic %s has ID %s on the brokers, but the ledger of %s was read from topic ID %s: the topic was deleted and recreated (or this is another cluster); sink it into a new table (floe will not guess which records are new)",
		e.Topic, e.Broker, e.Table, e.Ledger)
}

// CheckTopicID returns a *TopicIDError when the ledger of table recorded a
// topic ID for topic and the broker reports another (id, "" when the broker
// has no topic IDs).
func CheckTopicID(table string, l mapping.Summary, topic, id string) error {
	if recorded := l.TopicID(topic); recorded != "" && id != "" && recorded != id {
		return &TopicIDError{Table: table, Topic: topic, Ledger: recorded, Broker: id}
	}
	return nil
}

// Result describes a successful commit.
type Result struct {
	Commit mapping.Commit
	// Files counts the data files committed, DeleteFiles the delete files
	// (an upsert table's equality deletes).
	Files       int
	DeleteFiles int
	Rows        int64
	Bytes       int64
	Attempts    int
	// WriteTime and CommitTime split the duration between writing Parquet
	// files and committing metadata. A Writer's files count from the end
	// of the flush's consumption (Flush.Finished): the rows it encoded as
	// they were consumed are not in it.
	WriteTime, CommitTime time.Duration
}

// CommitOptions tune Commit.
type CommitOptions struct {
	// Writer identifies this process in the ledger.
	Writer string
	// MaxAttempts bounds commit attempts on conflicts; zero means 30.
	// Other failures are tried at most 5 times.
	MaxAttempts int
	// Logger receives retries and failures to remove uncommitted files;
	// nil means slog.Default().
	Logger *slog.Logger
	// InLedger are partitions the caller read in the ledger (a writer's
	// session): when one of them is missing from the ledger at commit
	// time, the table was rolled back (or a branch published over it)
	// under the writer, which is then fenced, even if the table as this
	// writer last loaded it already lacked the partition.
	InLedger []mapping.TopicPartition
	// DeadLetters is the dead-letter table (OpenDeadLetters) that takes
	// the flush's dead letters; needed when the flush has any.
	DeadLetters *Table
	// LookForFilesAfter is the age of a flush's Writer past which the
	// commit first looks for the files it wrote (a request per file), and
	// refuses with a *FlushFilesGoneError when one is gone: zero means
	// DefaultLookForFilesAfter, a negative value every flush of a Writer.
	LookForFilesAfter time.Duration
}

// DefaultLookForFilesAfter is CommitOptions.LookForFilesAfter's default. A
// flush's files are unreferenced until its commit, and floe maintain
// --remove-orphans deletes unreferenced files older than --orphan-min-age
// (an hour by default, less when the operator says so): a flush as long
// as that commits files that are gone, and the ledger holds offsets whose
// rows are lost (found by review s63). Flushes of the default interval
// are far younger, and pay nothing.
const DefaultLookForFilesAfter = time.Minute

// FlushFilesGoneError reports a flush whose commit found a file it wrote
// gone from the table's storage (an orphan cleanup deleted it): nothing
// was committed, and its other files were deleted. Its records are to be
// read again.
type FlushFilesGoneError struct {
	Table, Path string
	// Age is how long before the commit the flush's Writer was made.
	Age time.Duration
}

func (e *FlushFilesGoneError) Error() string {
	return fmt.Sprintf("commit to %s: file %s of the flush is gone from storage before its commit (the flush began %s ago; floe maintain --remove-orphans deletes unreferenced files older than --orphan-min-age, and a flush's files are unreferenced until its commit): nothing was committed; flush more often (--flush-interval) or keep --orphan-min-age well above the flush interval",
		e.Table, e.Path, e.Age.Round(time.Second))
}

// Commit writes the flush's batches as Parquet files, one file set per
// partition, and commits them in one snapshot on the table's branch whose
// summary carries the ranges. It releases the batches. What the snapshot
// does with the rows depends on the table's mode (writeChanges): an append
// table appends them; an upsert table adds each key's latest row and
// equality deletes of every key the flush touched, in one row delta
// (upsertChanges); a legacy state table (mapping.ModeFold) is refused with
// a *LegacyStateError.
//
// The commit asserts the branch head it started from. When another commit
// got in first, Commit reloads the table: if the ledger still ends where
// each of this flush's ranges starts, it retries with the same files;
// otherwise it deletes its files and returns a *FencedError (keeping them
// when this commit landed unanswered and was rolled back since: its
// snapshot names them). When a commit's
// outcome is unknown (the catalog failed mid-request), the reloaded ledger
// tells whether this commit id made it, so a commit is never applied twice.
//
// Dead letters are written into data files of the dead-letter table before
// the commit, each row stamped with the commit's id, and the commit lists
// them (mapping.Commit.DeadLetterFiles); once the commit is in, they are
// added to the dead-letter table. A failure between the two is a
// *DeadLettersPendingError: the commit stands, and ReconcileDeadLetters
// adds them later. So the dead-letter table converges to what the ledger
// names.
func (t *Table) Commit(ctx context.Context, f Flush, opts CommitOptions) (Result, error) {
	defer func() {
		for _, bs := range f.Batches {
			releaseAll(bs)
		}
		for _, bs := range f.DeadLetters {
			releaseAll(bs)
		}
	}()
	res, dead, err := t.commit(ctx, f, opts)
	if err != nil || len(dead) == 0 {
		return res, err
	}
	if err := opts.DeadLetters.addDeadLetters(ctx, opts.Logger, res.Commit.ID, dead); err != nil {
		return res, &DeadLettersPendingError{Table: t.Name(), DeadLetters: opts.DeadLetters.Name(), Commit: res.Commit.ID, Err: err}
	}
	return res, nil
}

func releaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}

// commit makes the data table's commit of f, returning the dead-letter
// files it lists: it checks the flush against the ledger, turns it into
// changes for the table's mode (writeChanges), writes the dead letters and
// the ledger properties, and applies the changes (apply).
func (t *Table) commit(ctx context.Context, f Flush, opts CommitOptions) (res Result, dead []iceberg.DataFile, err error) {
	if err := t.writable("commit to"); err != nil {
		return Result{}, nil, err
	}
	deadRows, err := t.checkFlush(f, opts)
	if err != nil {
		return Result{}, nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := t.lookForFlushFiles(ctx, log, f, opts.LookForFilesAfter); err != nil {
		return Result{}, nil, err
	}
	res = Result{Commit: mapping.Commit{ID: uuid.NewString(), Writer: opts.Writer, Ranges: f.Ranges, TopicIDs: f.TopicIDs, FileGroups: f.fileGroups()}}
	if deadRows {
		// Before any commit names it: maintenance and the audit find the
		// table through the property whatever the ledger comes to name.
		if err := t.recordDeadLetterTable(ctx, opts.DeadLetters.Name()); err != nil {
			return res, nil, err
		}
	}
	known, err := t.checkStart(ctx, log, f, opts.InLedger, res.Commit)
	if err != nil {
		return res, nil, err
	}

	if t.keyNamedOtherwise(f.Schema) && !sameKeyFields(f.Schema, t.tbl.Schema()) {
		// Another writer named the table's key since this writer's session
		// began: the flush's records were judged without it (a key with
		// other fields is a dead letter), and are read again for it (from a
		// review: a row of another key's shape replaced the named key's).
		// A key column struct the table already has as the flush does
		// (widened so by an earlier floe) is not a key named since.
		if f.Writer != nil {
			t.removeFiles(ctx, log, f.DataFiles())
		}
		return res, nil, ErrSchemaMoved
	}
	start := time.Now()
	ch, err := t.writeChanges(ctx, f)
	res.WriteTime = f.Finished + time.Since(start)
	if err != nil {
		t.removeFiles(ctx, log, ch.files())
		return res, nil, fmt.Errorf("write data files of %s: %w", t.Name(), err)
	}
	res.Commit.FileGroups = append(res.Commit.FileGroups, ch.Groups...)
	if deadRows {
		// Written before the commit that lists them, and removed with the
		// data files when that commit is fenced.
		// Not err: the deferred removal below must see the commit's.
		target, werr := opts.DeadLetters.withProperties(opts.DeadLetters.tbl, positionMetrics)
		if werr == nil {
			dead, werr = writeDeadLetters(ctx, target, f.DeadLetters, res.Commit.ID)
		}
		if werr != nil {
			t.removeFiles(ctx, log, ch.files())
			opts.DeadLetters.removeFiles(ctx, log, dead)
			return res, nil, fmt.Errorf("write dead-letter files of %s into %s: %w", t.Name(), opts.DeadLetters.Name(), werr)
		}
		for _, df := range dead {
			res.Commit.DeadLetterFiles = append(res.Commit.DeadLetterFiles, df.FilePath())
		}
		res.Commit.DeadLetterTable = opts.DeadLetters.Name()
		defer func() {
			if discarded(err) {
				opts.DeadLetters.removeFiles(ctx, log, dead)
			}
		}()
	}
	props, rangesPath, err := t.encodeCommit(ctx, res.Commit)
	if err != nil {
		t.removeFiles(ctx, log, ch.files())
		opts.DeadLetters.removeFiles(ctx, log, dead)
		return res, nil, err
	}
	if rangesPath != "" {
		// Removed with the data files when the commit is known never to
		// land; otherwise an unreferenced one is maintenance's to collect.
		defer func() {
			if discarded(err) {
				t.removePaths(ctx, log, rangesPath)
			}
		}()
	}
	res.Rows, res.Files, res.DeleteFiles, res.Bytes = ch.Rows, len(ch.Add), len(ch.Deletes), ch.bytes()

	start = time.Now()
	defer func() { res.CommitTime = time.Since(start) }()
	return res, dead, t.apply(ctx, log, f, ch, props, known, opts.MaxAttempts, &res)
}

// lookForFlushFiles returns a *FlushFilesGoneError, after deleting the
// flush's other files, when f's Writer is older than after
// (CommitOptions.LookForFilesAfter) and a file it wrote is gone.
func (t *Table) lookForFlushFiles(ctx context.Context, log *slog.Logger, f Flush, after time.Duration) error {
	if after == 0 {
		after = DefaultLookForFilesAfter
	}
	if f.Writer == nil || time.Since(f.Writer.opened) <= after {
		return nil
	}
	files := f.DataFiles()
	paths := make([]string, len(files))
	for i, df := range files {
		paths[i] = df.FilePath()
	}
	missing, err := t.MissingFiles(ctx, paths)
	if err != nil {
		return fmt.Errorf("commit to %s: look for the flush's files before its commit: %w", t.Name(), err)
	}
	if len(missing) == 0 {
		return nil
	}
	t.removeFiles(ctx, log, files)
	return &FlushFilesGoneError{Table: t.Name(), Path: missing[0], Age: time.Since(f.Writer.opened)}
}

// checkFlush checks that f is a flush the table can commit, and reports
// whether it has dead-letter rows.
func (t *Table) checkFlush(f Flush, opts CommitOptions) (deadRows bool, err error) {
	if len(f.Ranges) == 0 {
		return false, errors.New("commit: no ranges (floe never writes a snapshot without ranges)")
	}
	for tp, bs := range f.Batches {
		rows := false
		for _, b := range bs {
			rows = rows || b.NumRows() > 0
		}
		if rows && !slices.ContainsFunc(f.Ranges, func(r mapping.Range) bool { return r.TopicPartition == tp && !r.Deleted() }) {
			return false, fmt.Errorf("commit: rows of %s have no range", tp)
		}
	}
	for tp, fs := range f.Files {
		if len(fs) > 0 && !slices.ContainsFunc(f.Ranges, func(r mapping.Range) bool { return r.TopicPartition == tp && !r.Deleted() }) {
			return false, fmt.Errorf("commit: data files of %s have no range", tp)
		}
	}
	if (len(f.Files) > 0 || len(f.Groups) > 0) && (f.Writer == nil || len(f.Batches) > 0 || t.mode != mapping.ModeAppend) {
		return false, errors.New("commit: streamed files need their Writer, and no batches, on an append table")
	}
	if out := (mapping.Commit{Ranges: f.Ranges, FileGroups: f.fileGroups()}).SpansOutside(); len(out) > 0 {
		return false, fmt.Errorf("commit: a file group holds rows of %s, which no range of the flush with rows covers", out[0])
	}
	for _, g := range f.Groups {
		for _, s := range g.Spans {
			if len(f.Files[s.TopicPartition]) > 0 {
				return false, fmt.Errorf("commit: rows of %s are in a file group and in files of their own", s.TopicPartition)
			}
		}
	}
	if (len(f.Deletes) > 0 || len(f.Truncated) > 0) && t.mode != mapping.ModeUpsert {
		return false, fmt.Errorf("commit: rows that delete their key, into table %s of mode %s", t.Name(), t.mode)
	}
	if len(f.Truncated) > 0 {
		if err := t.CanTruncate(); err != nil {
			return false, fmt.Errorf("commit: %w", err)
		}
	}
	for tp, bs := range f.DeadLetters {
		for _, b := range bs {
			deadRows = deadRows || b.NumRows() > 0
		}
		if deadRows && !slices.ContainsFunc(f.Ranges, func(r mapping.Range) bool { return r.TopicPartition == tp && r.DeadLetters > 0 }) {
			return false, fmt.Errorf("commit: dead letters of %s have no range", tp)
		}
	}
	if deadRows && opts.DeadLetters == nil {
		return false, errors.New("commit: the flush has dead letters and no dead-letter table")
	}
	return deadRows, nil
}

// checkStart checks, before anything is written, that the ledger as last
// loaded ends where f starts (settle) and that f's topics are those the
// ledger was read from. It returns each partition's next offset in the
// ledger then (-1 for a partition of inLedger no longer in it), which
// every later settle checks against.
func (t *Table) checkStart(ctx context.Context, log *slog.Logger, f Flush, inLedger []mapping.TopicPartition, c mapping.Commit) (map[mapping.TopicPartition]int64, error) {
	if f.Writer != nil && !t.fits(f.Writer, f.Schema) {
		// The files may have been written for a schema committed since
		// the table was last loaded (ReserveSchema): judge them by the
		// table as it is now.
		if err := t.Refresh(ctx); err != nil {
			return nil, err
		}
	}
	// The ledger as last loaded must end where this flush starts. Normally
	// the caller read it there; if the table was reloaded since and another
	// writer had advanced, the branch-head assertion alone would not notice.
	l, err := t.Summary(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("read ledger of %s to check commit %s against it: %w", t.Name(), c.ID, err)
	}
	for topic, id := range f.TopicIDs {
		if err := CheckTopicID(t.Name(), l, topic, id); err != nil {
			return nil, err
		}
	}
	known := l.Next()
	for _, tp := range inLedger {
		if _, ok := known[tp]; !ok {
			known[tp] = -1 // gone already: settle fences
		}
	}
	if _, err := t.settle(ctx, log, c, known, nil); err != nil {
		return nil, err
	}
	return known, nil
}

// apply commits ch, whose snapshot summary is props, asserting the branch
// head each attempt starts from. When another commit got in first, it
// reloads the table: if the ledger still ends where each of the flush's
// ranges starts (known), it tries again with the same files (written
// again when the schema or spec they were written for changed: refit);
// otherwise it deletes them and returns a *FencedError. It knows nothing
// of modes: ch says what one snapshot adds, removes and deletes.
func (t *Table) apply(ctx context.Context, log *slog.Logger, f Flush, ch Changes, props iceberg.Properties, known map[mapping.TopicPartition]int64, maxAttempts int, res *Result) error {
	if maxAttempts <= 0 {
		maxAttempts = 30
	}
	// Conflicts are retried up to maxAttempts: every round one writer wins.
	// Other failures (storage or catalog errors) get a few tries: a
	// permanent one, such as a rejected credential, should surface soon.
	const maxErrors = 5
	var (
		lastErr error
		errs    int
		// failed is the last error counted in errs; unknown is set once
		// an attempt failed otherwise than by a conflict, which may have
		// been applied.
		failed  error
		unknown bool
	)
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		res.Attempts = attempt
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return fmt.Errorf("commit %s to %s: %w (last error: %w)", res.Commit.ID, t.Name(), err, lastErr)
			}
			if err := t.Refresh(ctx); err != nil {
				if isNoSuchTable(err) {
					return fmt.Errorf("commit %s to %s: the table was dropped or renamed while this writer was committing to it (floe drop, or another tool): nothing more will be committed to it; stop this writer. What was committed is kept unless the table's files were deleted with it: a renamed table holds it under its new name, and a table dropped with its files kept (floe drop --keep-files, or a DROP TABLE without purge) is put back, ledger included, by floe register --table %s --location %s; a table dropped with its files is gone, and a sink run again under the old name starts a new table from --start: %w",
						res.Commit.ID, t.Name(), t.Name(), t.tbl.Location(), err)
				}
				if _, replaced := errors.AsType[*TableReplacedError](err); replaced {
					return fmt.Errorf("commit %s to %s: %w", res.Commit.ID, t.Name(), err)
				}
				lastErr, failed = err, err
				log.Warn("reload before commit retry failed", "table", t.Name(), "attempt", attempt, "err", err)
				if errs++; errs >= maxErrors {
					break
				}
				continue
			}
			if errors.Is(lastErr, table.ErrCommitFailed) {
				// The catalog refused the swap after the metadata file
				// was written ("moved underneath us"): that file can
				// never become current, and nothing else collects it.
				if _, err := t.RemoveStaleMetadata(ctx, log, 0, false); err != nil {
					log.Warn("cannot remove the metadata file of a commit that lost the race", "table", t.Name(), "err", err)
				}
			}
			// The failed attempt may have been applied (an unknown
			// outcome), or another writer may have fenced this one.
			applied, err := t.settle(ctx, log, res.Commit, known, ch.files())
			if applied != nil {
				res.Commit = *applied
			}
			if err != nil || applied != nil {
				return withFailure(err, failed)
			}
			if errs >= maxErrors {
				break
			}
		}
		var err error
		// A retry's commit may have landed and been rolled back since: its
		// snapshot names the files, which must stay.
		kept := attempt > 1 && t.snapshotOf(res.Commit.ID) != 0
		shape := ch.shape
		if ch, err = t.refit(ctx, log, f, ch, kept); err != nil {
			return fmt.Errorf("commit %s to %s: %w", res.Commit.ID, t.Name(), err)
		}
		if ch.shape != shape && len(res.Commit.FileGroups)+len(ch.Groups) > 0 {
			// Written again for another writer's schema or spec: the
			// ledger names the new files of the groups (a flush of
			// batches has no others; from a review: an upsert flush read
			// again at every schema change stopped its sink after 20).
			res.Commit.FileGroups = ch.Groups
			if props, _, err = t.encodeCommit(ctx, res.Commit); err != nil {
				t.removeFiles(ctx, log, ch.files())
				return fmt.Errorf("commit %s to %s: %w", res.Commit.ID, t.Name(), err)
			}
		}
		res.Rows, res.Files, res.DeleteFiles, res.Bytes = ch.Rows, len(ch.Add), len(ch.Deletes), ch.bytes()
		snap, err := t.commitOnce(ctx, ch, props, f.Schema)
		if err == nil {
			res.Commit.SnapshotID = snap.SnapshotID
			res.Commit.CommittedAt = time.UnixMilli(snap.TimestampMs).UTC()
			return nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return fmt.Errorf("commit %s to %s: %w", res.Commit.ID, t.Name(), err)
		}
		if catalog.IsRefused(err) && !unknown && !errors.Is(err, errCommitApplied) {
			// Not applied, and asking again changes nothing (a role
			// without the privilege): its files go at once, unless an
			// earlier attempt's outcome is unknown (a new user's
			// SELECT-only role retried five times and left them).
			t.removeFiles(ctx, log, ch.files())
			return &CommitRefusedError{Table: t.Name(), Commit: res.Commit.ID, Err: err}
		}
		conflict := isConflict(err)
		if !conflict {
			errs, failed, unknown = errs+1, err, true
		}
		log.Info("commit attempt failed, reloading to decide between retry and fencing",
			"table", t.Name(), "attempt", attempt, "conflict", conflict, "err", err)
	}
	// A last look: the final attempt may have been applied after all, or
	// failed because another writer fenced this one.
	if err := t.Refresh(ctx); err == nil {
		applied, err := t.settle(ctx, log, res.Commit, known, ch.files())
		if applied != nil {
			res.Commit = *applied
			return nil
		}
		if err != nil {
			return withFailure(err, failed)
		}
		return fmt.Errorf("commit %s to %s: gave up after %d attempts; the ledger does not hold it, so its data files are orphans for maintenance: %w",
			res.Commit.ID, t.Name(), res.Attempts, lastErr)
	}
	return fmt.Errorf("commit %s to %s: gave up after %d attempts; whether the last one was applied is unknown until the table can be read again, and the next run resumes from the ledger either way: %w",
		res.Commit.ID, t.Name(), res.Attempts, lastErr)
}

// settle checks commit c against the ledger as last loaded: before the
// first attempt, and after a failed one. It returns the ledger's copy of c
// (with its snapshot id and commit time) when c turns out to have been
// applied, and a *FencedError (after deleting the files, unless a snapshot
// of c that was rolled back still names them) when another writer
// advanced one of the flush's partitions, or when a partition that
// was in the ledger before the first attempt (known, each partition's next
// offset then) is no longer in it: committing on top would restart that
// partition at this writer's offset and leave everything below it unsunk.
func (t *Table) settle(ctx context.Context, log *slog.Logger, c mapping.Commit, known map[mapping.TopicPartition]int64, files []iceberg.DataFile) (*mapping.Commit, error) {
	l, err := t.Summary(ctx, 0)
	if err != nil {
		return nil, fmt.Errorf("read ledger of %s to check commit %s against it: %w", t.Name(), c.ID, err)
	}
	next := l.Next()
	if mayHaveLanded(c, next) {
		if lc, ok, err := t.commitByID(ctx, c.ID); err != nil {
			return nil, fmt.Errorf("read ledger of %s to check commit %s against it: %w", t.Name(), c.ID, err)
		} else if ok {
			return &lc, nil
		}
	}
	// A flush may hold several ranges of one partition (data, a recorded
	// loss, more data): only the lowest must meet the ledger's end.
	low := map[mapping.TopicPartition]int64{}
	for _, r := range c.Ranges {
		if l, ok := low[r.TopicPartition]; !ok || r.Low < l {
			low[r.TopicPartition] = r.Low
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(low), mapping.TopicPartition.Compare) {
		n, ok := next[tp]
		_, wasKnown := known[tp]
		if (ok && n != low[tp]) || (!ok && wasKnown) {
			fenced := &FencedError{Table: t.Name(), Partition: tp, Low: low[tp], Next: n, Vanished: !ok, Kept: t.snapshotOf(c.ID)}
			if fenced.Kept != 0 {
				log.Warn("commit landed, but its answer was lost and the branch was rolled back past it before the retry: keeping its files, which that snapshot still names (expiry collects them with it)",
					"table", t.Name(), "commit", c.ID, "snapshot", fenced.Kept)
			} else {
				t.removeFiles(ctx, log, files)
			}
			return nil, fenced
		}
	}
	return nil, nil
}

// snapshotOf returns the snapshot the table keeps whose summary names
// commit id, on any branch or none (0: there is none).
func (t *Table) snapshotOf(id string) int64 {
	for _, s := range t.tbl.Metadata().Snapshots() {
		if s.Summary != nil && s.Summary.Properties[mapping.KeyCommitID] == id {
			return s.SnapshotID
		}
	}
	return 0
}

// mayHaveLanded reports whether commit c may be in a ledger whose
// partitions end at next (mapping.Summary.Next): not when one of its
// non-empty ranges reaches beyond its partition's end, which the ledger
// would cover had c landed. That is every first attempt's case, and a
// retry's whose earlier attempt failed: only then does settle look c up
// by its id, a walk of the ledger's whole ancestry that took a quarter of
// a sink's CPU at 15,000 commits, growing with the table's age.
func mayHaveLanded(c mapping.Commit, next map[mapping.TopicPartition]int64) bool {
	for _, r := range c.Ranges {
		if n, ok := next[r.TopicPartition]; r.Len() > 0 && (!ok || n < r.High) {
			return false
		}
	}
	return true
}

// stage returns a transaction on the table's branch with the schema
// changes that let it take rows of schema want applied (none for a nil
// want), and the table as it will be with them. A want the table's schema
// cannot be evolved to is a *SchemaChangedError: the flush was built for a
// schema another writer has since changed.
func (t *Table) stage(want *iceberg.Schema) (*table.Transaction, *table.Table, error) {
	return t.stageOn(t.tbl, want)
}

// stageOn is stage on base, the table as loaded at some point: metadata
// is immutable, so a writer of the next flush may stage on it while the
// commit of the previous one adopts a new t.tbl.
func (t *Table) stageOn(base *table.Table, want *iceberg.Schema) (*table.Transaction, *table.Table, error) {
	txn := base.NewTransactionOnBranch(t.branch)
	if want == nil {
		return txn, base, nil
	}
	key, name := t.keyColumns(want)
	// Key columns are added required: the upsert table's rows all have
	// them (a record without is a dead letter).
	upd := txn.UpdateSchema(true, len(key) > 0)
	changed, err := evolveSchema(upd, base.Schema(), want, key)
	if err != nil {
		return nil, nil, &SchemaChangedError{Table: t.Name(), Err: err}
	}
	identified, err := t.identify(base, txn, upd, want, key, name)
	if err != nil {
		return nil, nil, err
	}
	if !changed && !identified {
		return txn, base, nil
	}
	if err := upd.Commit(); err != nil {
		return nil, nil, fmt.Errorf("stage the schema change of %s: %w", t.Name(), err)
	}
	// Partition fields on the columns this change creates (partition.go).
	if err := t.stagePartitionFields(base, txn); err != nil {
		return nil, nil, err
	}
	staged, err := txn.StagedTable()
	if err != nil {
		return nil, nil, fmt.Errorf("stage the schema change of %s: %w", t.Name(), err)
	}
	return txn, staged.Table, nil
}

// isConflict reports whether err is a lost optimistic-concurrency race.
// iceberg-go's SQL catalog reports a stale branch head as a plain
// "requirement failed" error, not ErrCommitFailed.
func isConflict(err error) bool {
	// Its schema requirement says "Requirement failed" (capitalised). A
	// commit on a branch asserts only its own branch: a commit on another
	// branch (a sink on main beside a replay onto a branch) that took the
	// table's next sequence number shows as the new snapshot's sequence
	// number being too low, a conflict like any other.
	msg := strings.ToLower(err.Error())
	return errors.Is(err, table.ErrCommitFailed) || strings.Contains(msg, "requirement failed") ||
		strings.Contains(msg, "must be > than last sequence number")
}

// writeFiles writes each batch into data files of target of its own, in
// parallel up to the number of CPUs.
func writeFiles(ctx context.Context, target *table.Table, batches map[mapping.TopicPartition][]arrow.RecordBatch) ([]iceberg.DataFile, error) {
	var (
		mu    sync.Mutex
		files []iceberg.DataFile
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for tp, bs := range batches {
		for _, b := range bs {
			if b.NumRows() == 0 {
				continue
			}
			b.Retain() // WriteRecords releases what it consumes; Commit releases its own reference.
			g.Go(func() error {
				one := func(yield func(arrow.RecordBatch, error) bool) { yield(b, nil) }
				for df, err := range table.WriteRecords(gctx, target, b.Schema(), one) {
					if err != nil {
						return fmt.Errorf("partition %s: %w", tp, err)
					}
					mu.Lock()
					files = append(files, df)
					mu.Unlock()
				}
				return nil
			})
		}
	}
	err := g.Wait()
	return files, err
}

// writeDeadLetters writes the dead-letter batches into data files of the
// dead-letter table target, every row stamped with the data table's
// commit id (mapping.ColCommitID), which a retried or settled commit
// keeps. Every partition's dead letters go into the same files, rolled at
// target's write.target-file-size-bytes: a file per partition made a
// commit with a dead letter in each of 1,000 partitions write 1,000 tiny
// files, and the dead-letter table's readers go by each row's commit id
// and position, never by which partition a file holds.
func writeDeadLetters(ctx context.Context, target *table.Table, batches map[mapping.TopicPartition][]arrow.RecordBatch, id string) ([]iceberg.DataFile, error) {
	var stamped []arrow.RecordBatch
	defer func() { releaseAll(stamped) }()
	// In partition and offset order, so that a file's bounds stay narrow
	// for the readers that look up one position.
	for _, tp := range slices.SortedFunc(maps.Keys(batches), mapping.TopicPartition.Compare) {
		for _, b := range batches[tp] {
			if b.NumRows() == 0 {
				continue
			}
			sb, err := mapping.StampCommitID(memory.DefaultAllocator, b, id)
			if err != nil {
				return nil, fmt.Errorf("dead letters of %s: %w", tp, err)
			}
			stamped = append(stamped, sb)
		}
	}
	if len(stamped) == 0 {
		return nil, nil
	}
	all := func(yield func(arrow.RecordBatch, error) bool) {
		for _, b := range stamped {
			// WriteRecords releases what it consumes (also when it stops
			// early); the deferred release is this function's own.
			b.Retain()
			if !yield(b, nil) {
				return
			}
		}
	}
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, target, stamped[0].Schema(), all) {
		if err != nil {
			return files, err
		}
		files = append(files, df)
	}
	return files, nil
}

// removeFiles deletes data files that will never be committed. Failures only
// leave orphans, which maintenance removes, so they are logged to log (nil:
// slog.Default()), not returned.
func (t *Table) removeFiles(ctx context.Context, log *slog.Logger, files []iceberg.DataFile) {
	if len(files) == 0 {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		log.Warn("cannot open table storage to remove uncommitted files", "table", t.Name(), "err", err)
		return
	}
	for _, df := range files {
		if err := fsys.Remove(df.FilePath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cannot remove uncommitted data file", "file", df.FilePath(), "err", err)
		}
	}
}

func backoff(attempt int) time.Duration {
	d := min(10*time.Millisecond<<min(attempt, 8), 2*time.Second)
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
