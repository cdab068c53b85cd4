package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
)

// Snapshot summary properties of a compaction. A compaction snapshot
// carries no floe.commit-id and no ranges, so it is not in the ledger; its
// floe.* properties are archived with the ledger entries when it expires,
// so that the audit recognises its files after that too (IsCompaction).
const (
	// KeyOperation names what floe did in a snapshot that is not a ledger
	// commit; OperationCompact is a compaction.
	KeyOperation     = "floe.operation"
	OperationCompact = "compact"
	// KeyCompactID is the compaction's UUID: a retry after an unknown
	// outcome finds out whether it landed.
	KeyCompactID = "floe.compact.id"
	// KeyCompactReplaced and KeyCompactAdded count the data files the
	// compaction removed and added, KeyCompactRows their rows (the same
	// number on both sides).
	KeyCompactReplaced = "floe.compact.replaced-files"
	KeyCompactAdded    = "floe.compact.added-files"
	KeyCompactRows     = "floe.compact.rows"
)

// DefaultTargetFileSize is the size a compaction aims its files at:
// Iceberg's own default for write.target-file-size-bytes.
const DefaultTargetFileSize = 512 << 20

// CompactOptions say how Compact rewrites files.
type CompactOptions struct {
	// TargetFileSize is the size of the files it writes (zero:
	// DefaultTargetFileSize). Files of at least three quarters of it are
	// left as they are; smaller ones are merged up to it, a file an
	// earlier compaction wrote only with at least as many rows of others
	// (tiered).
	TargetFileSize int64
	// MaxAttempts bounds commit attempts when sinks commit in between;
	// zero means 30.
	MaxAttempts int
	// Turn, when set, is held around each commit attempt: the reload of
	// the table, the checks of the plan on it and the commit. A sink
	// compacting its own table passes the lock it holds around each of
	// its commits (connector.Config.CommitTurn), so that the compaction's
	// commit runs between two of them, on the head the sink's last commit
	// made, and never loses to that sink however fast it commits; the
	// planning and the rewriting of files run beside the sink's commits.
	// Other writers can still get in first: those cost a retry, as
	// without it.
	Turn sync.Locker
	// CommitBytes bounds the bytes of the files one commit of a
	// compaction replaces (zero: DefaultCompactCommitBytes): a
	// compaction of more is made in parts, each rewritten and committed
	// before the next is rewritten. A part's files are unreferenced until
	// its commit, and a compaction does not commit files older than
	// compactMaxFileAge: one commit of a large table's whole backlog,
	// rewritten for longer than that, never committed.
	CommitBytes int64
	// DryRun plans and reports, and writes nothing.
	DryRun bool
	// Logger receives retries; nil: slog.Default().
	Logger *slog.Logger
}

// DefaultCompactCommitBytes is CompactOptions.CommitBytes's default: eight
// files of DefaultTargetFileSize, minutes of rewriting where an orphan
// cleanup's age allows half an hour.
const DefaultCompactCommitBytes = 8 * DefaultTargetFileSize

// CompactResult is what Compact did (or, in a dry run, would do). Its JSON
// field names are stable (floe maintain --json).
type CompactResult struct {
	Table string `json:"table"`
	// SnapshotID is the compaction's last snapshot; zero when nothing was
	// rewritten. Commits counts its snapshots: more than one when it
	// replaced more than CompactOptions.CommitBytes.
	SnapshotID int64 `json:"snapshot_id,omitempty"`
	Commits    int   `json:"commits,omitempty"`
	// FilesBefore and FilesAfter count the live data files.
	FilesBefore int `json:"files_before"`
	FilesAfter  int `json:"files_after"`
	// Groups are the sets of files merged; Replaced and Added count the
	// files removed and written, Rows their rows, BytesBefore and
	// BytesAfter their sizes.
	Groups      int   `json:"groups"`
	Replaced    int   `json:"replaced_files"`
	Added       int   `json:"added_files"`
	Rows        int64 `json:"rows"`
	BytesBefore int64 `json:"bytes_before"`
	BytesAfter  int64 `json:"bytes_after"`
	// Unplaced counts small files left alone because the ledger does not
	// place them (not floe's, metrics disabled, several topics could hold
	// them, offsets reaching a gap or a lost range, or row-level deletes
	// apply to them), of those the compaction would otherwise have merged:
	// a small file no plan merges is not looked up in the ledger, so that a
	// compaction of an old table reads no more of it than its new files'
	// offsets.
	Unplaced int `json:"unplaced_files"`
	// OtherSpec counts small files written under an older partition spec
	// of the table: compaction writes the current spec's files and keeps
	// those as they are.
	OtherSpec int `json:"other_spec_files"`
	// Foreign counts small files another writer added (neither a floe
	// commit nor a floe compaction): merged, its change would become a
	// floe compaction's, which the audit no longer reports.
	Foreign int `json:"foreign_files,omitempty"`
	// LiveRows counts the rows of the files written by a compaction of
	// an upsert table, which applies its deletes (Rows is then the rows
	// of the files replaced, before deletes), and DroppedDeletes the
	// delete files it removed because they apply to no live data file
	// any more.
	LiveRows       int64 `json:"live_rows,omitempty"`
	DroppedDeletes int   `json:"dropped_delete_files,omitempty"`
	// Attempts counts commit attempts (sinks committing in between cost
	// one each).
	Attempts int           `json:"attempts"`
	Duration time.Duration `json:"duration_ns"`
	// deletes is set for a compaction of an upsert table, which applies
	// its deletes: only then do LiveRows and DroppedDeletes say anything.
	deletes bool
}

// LogAttrs are r's figures as log attributes, the deletes applied only
// where the compaction applies them.
func (r CompactResult) LogAttrs() []any {
	attrs := []any{"table", r.Table, "snapshot", r.SnapshotID, "replaced", r.Replaced, "added", r.Added, "rows", r.Rows}
	if r.deletes {
		attrs = append(attrs, "live_rows", r.LiveRows, "dropped_delete_files", r.DroppedDeletes)
	}
	if r.Foreign > 0 {
		attrs = append(attrs, "foreign_files_kept", r.Foreign)
	}
	return append(attrs, "files", r.FilesAfter, "attempts", r.Attempts, "took", r.Duration.Round(time.Millisecond))
}

// ErrCompactConflict is matched (errors.Is) by a *CompactConflictError.
var ErrCompactConflict = errors.New("compaction conflict")

// CompactConflictError reports a compaction given up because the table
// changed under it in a way its plan cannot survive: a file it replaces is
// no longer live (another compaction, a rollback), or the ledger no longer
// holds the ranges its files span. Nothing was committed, and the files
// it wrote were deleted (kept, orphans, when an earlier attempt's outcome
// was unknown: see commitCompaction); running it again plans on the new
// table.
type CompactConflictError struct {
	Table, Reason string
}

func (e *CompactConflictError) Error() string {
	return fmt.Sprintf("compaction of %s gave up, nothing was committed: %s; run it again", e.Table, e.Reason)
}

func (e *CompactConflictError) Is(target error) bool { return target == ErrCompactConflict }

// ErrCompactUnsupported is returned for a table Compact does not rewrite: a
// state table (mapping.ModeFold), whose folds rewrite its files
// themselves, and an upsert table with another writer's files.
var ErrCompactUnsupported = errors.New("compaction not supported")

// IsFloeCommit reports whether a snapshot of the table's history, live
// or archived, is a floe commit: an entry of the ledger. The archive
// index answers for expired snapshots without reading the archive.
func (t *Table) IsFloeCommit(snapshotID int64) bool {
	if s := t.tbl.Metadata().SnapshotByID(snapshotID); s != nil {
		return s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties)
	}
	e, _, ok := t.archive.find(snapshotID)
	return ok && e.floeCommit()
}

// madeByFloe reports whether a snapshot of the table, live or archived,
// is floe's: a floe commit or a floe compaction. A compaction merges only
// the files such snapshots added: merged, another writer's file or delete
// would become a floe compaction's, and the audit, which reports them,
// would see the table complete (found by review).
func (t *Table) madeByFloe(snapshotID int64) bool {
	return t.IsFloeCommit(snapshotID) || t.IsCompaction(snapshotID)
}

// IsCompaction reports whether a snapshot of the table, live or expired
// and archived, is a compaction floe made.
func (t *Table) IsCompaction(snapshotID int64) bool {
	if s := t.tbl.Metadata().SnapshotByID(snapshotID); s != nil {
		return s.Summary != nil && s.Summary.Properties[KeyOperation] == OperationCompact
	}
	e, _, ok := t.archive.find(snapshotID)
	return ok && e.flags()&entryCompaction != 0
}

// Compacted reports whether floe compacted the table at some point of its
// history, live or archived: an upsert table's compaction applies its
// deletes and drops them.
func (t *Table) Compacted() bool {
	for _, s := range t.tbl.Metadata().Snapshots() {
		if t.IsCompaction(s.SnapshotID) {
			return true
		}
	}
	if t.archive == nil {
		return false
	}
	for _, seg := range t.archive.segs {
		for _, e := range seg.ix.entries {
			if e.flags()&entryCompaction != 0 {
				return true
			}
		}
	}
	return false
}

// Compact rewrites the small data files of the table's branch into larger
// ones, in one snapshot that replaces them (Iceberg operation "replace"),
// leaving the ledger as it is. An upsert table is compacted by
// compactDeletes, which also applies its row-level deletes; what follows
// is about the other tables.
//
// Small files are merged across Kafka partitions, per Iceberg partition
// (of the current spec): a day of commits of a 1,000-partition topic
// compacts into files of the target size, not into one per partition. A
// compaction takes whole pieces: a file of one Kafka partition whose
// offsets lie on one unbroken chain of ledger ranges
// (mapping.Chain), or every file of a file group (a sink's lane,
// an earlier compaction's output) whose spans all lie on such chains. The
// offsets a merged set holds, its spans, are the union of its pieces'
// spans merged into intervals per partition: one interval per partition
// for contiguous commits. A set of one Kafka partition whose span is one
// interval writes pure files, which their bounds place as before; any
// other set's files are recorded as a file group under
// mapping.KeyFileGroups on the compaction snapshot, which the file-level
// audit and floe files read. So no merged file's spans reach a gap, a lost
// or aborted range, or a file the compaction leaves alone. A dead-letter
// table's small files are merged whatever they hold (deadLetterGroups).
//
// Compact runs beside live sinks: a commit in between makes its commit
// fail its branch assertion, and it reloads, checks that the ledger still
// holds every chain, and commits the same files again (the commit itself
// refuses a file to replace that is no longer live); when either check
// fails it deletes its files and plans again on the new table (another
// compaction merged some of its files first: two scheduled runs at once),
// up to maxCompactPlans times, then returns the *CompactConflictError. A
// sink's commit that loses to it retries, never fenced: a compaction
// moves no ledger range. A crash leaves the written files as orphans
// (floe maintain --remove-orphans); the replaced files stay reachable
// from older snapshots until snapshot expiry deletes them.
func (t *Table) Compact(ctx context.Context, opts CompactOptions) (CompactResult, error) {
	if err := t.writable("compact"); err != nil {
		return CompactResult{}, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	for plans := 1; ; plans++ {
		res, err := t.compactOnce(ctx, opts)
		if _, conflict := errors.AsType[*CompactConflictError](err); !conflict || plans == maxCompactPlans || ctx.Err() != nil {
			return res, err
		}
		opts.Logger.Info("compaction lost to another change of the table; planning again on it", "table", t.Name(), "err", err)
	}
}

// maxCompactPlans is how many times Compact plans on a table that changed
// under its commit in a way its plan cannot survive: the run that got in
// first was most often another compaction, after which what is left is
// planned quickly, or there is nothing left to merge.
const maxCompactPlans = 3

// compactOnce is Compact with one plan.
func (t *Table) compactOnce(ctx context.Context, opts CompactOptions) (CompactResult, error) {
	start := time.Now()
	res := CompactResult{Table: t.Name()}
	log := opts.Logger
	target := opts.TargetFileSize
	if target <= 0 {
		target = DefaultTargetFileSize
	}
	if err := t.Refresh(ctx); err != nil {
		return res, err
	}
	switch t.mode {
	case mapping.ModeAppend:
	case mapping.ModeUpsert:
		return t.compactDeletes(ctx, opts, log, target, start)
	case mapping.ModeFold:
		return res, fmt.Errorf("compact %s: it is a state table (%s=%s), whose folds rewrite its files themselves: %w", t.Name(), mapping.PropFold, mapping.FoldLatest, ErrCompactUnsupported)
	default:
		return res, fmt.Errorf("compact %s: this floe compacts append and upsert tables, and it is of mode %s: %w", t.Name(), t.mode, ErrCompactUnsupported)
	}
	plan, err := t.planCompaction(ctx, target)
	if err != nil {
		return res, err
	}
	res.FilesBefore, res.FilesAfter, res.Unplaced, res.OtherSpec, res.Foreign = plan.live, plan.live, plan.unplaced, plan.otherSpec, plan.foreign
	res.replacing(plan.groups)
	outputs := 0 // a group makes about one file per Iceberg partition
	for _, g := range plan.groups {
		outputs += icebergPartitions(g.files)
	}
	if len(plan.groups) == 0 || opts.DryRun {
		res.FilesAfter -= res.Replaced - outputs
		res.Duration = time.Since(start)
		return res, nil
	}

	parts := compactParts(plan.groups, cmp.Or(opts.CommitBytes, DefaultCompactCommitBytes))
	err = commitParts(t, log, parts, &res, res.replacing, func(_ int, part []compactGroup) error {
		return t.compactPart(ctx, log, plan, part, target, opts, &res)
	})
	if err != nil {
		return res, err
	}
	res.Duration = time.Since(start)
	log.Info("compacted", res.LogAttrs()...)
	return res, nil
}

// replacing sets r's figures of the files replaced (Groups, Replaced,
// Rows, BytesBefore) to those of groups.
func (r *CompactResult) replacing(groups []compactGroup) {
	var files []iceberg.DataFile
	for _, g := range groups {
		for _, f := range g.files {
			files = append(files, f.task.File)
		}
	}
	r.replacingFiles(len(groups), files)
}

// replacingFiles sets r's figures of the files replaced to those of
// files, in groups sets.
func (r *CompactResult) replacingFiles(groups int, files []iceberg.DataFile) {
	r.Groups, r.Replaced, r.Rows, r.BytesBefore = groups, len(files), 0, 0
	for _, df := range files {
		r.Rows += df.Count()
		r.BytesBefore += df.FileSizeBytes()
	}
}

// commitParts commits parts in their order, each with commit, logging
// each when there are several. When a part after the first fails, res's
// figures of the files replaced are set (replacing) to those of the parts
// committed, and the error says how many were.
func commitParts[G any](t *Table, log *slog.Logger, parts [][]G, res *CompactResult, replacing func([]G), commit func(i int, part []G) error) error {
	for i, part := range parts {
		if err := commit(i, part); err != nil {
			if i > 0 {
				replacing(slices.Concat(parts[:i]...))
				return fmt.Errorf("compact %s: %d of its %d parts committed, the last as snapshot %d, then: %w", t.Name(), i, len(parts), res.SnapshotID, err)
			}
			return err
		}
		if len(parts) > 1 {
			log.Info("compaction part committed", "table", t.Name(), "part", i+1, "of", len(parts), "snapshot", res.SnapshotID)
		}
	}
	return nil
}

// compactParts cuts groups, in their order, into the parts a compaction
// commits one by one: runs of groups whose files add up to at most limit
// bytes (a larger group alone).
func compactParts(groups []compactGroup, limit int64) [][]compactGroup {
	var (
		parts [][]compactGroup
		size  int64
	)
	for i, g := range groups {
		var bytes int64
		for _, f := range g.files {
			bytes += f.task.File.FileSizeBytes()
		}
		if i == 0 || size+bytes > limit {
			parts, size = append(parts, nil), 0
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], g)
		size += bytes
	}
	return parts
}

// compactPart rewrites the files of groups, part of plan, and commits
// them, adding what it committed to res.
func (t *Table) compactPart(ctx context.Context, log *slog.Logger, plan compactPlan, groups []compactGroup, target int64, opts CompactOptions, res *CompactResult) error {
	written, err := t.rewriteGroups(ctx, groups, target)
	news := slices.Concat(written...)
	if err != nil {
		t.removeFiles(ctx, log, news)
		return err
	}
	c := compactCommit{news: news, check: func(ctx context.Context) error { return t.checkCompaction(ctx, plan) }}
	for i, g := range groups {
		for _, f := range g.files {
			c.olds = append(c.olds, f.task.File)
		}
		if g.grouped {
			fg := mapping.FileGroup{Spans: g.spans}
			for _, df := range written[i] {
				fg.Files = append(fg.Files, df.FilePath())
			}
			c.groups = append(c.groups, fg)
		}
	}
	return t.commitResult(ctx, log, c, opts, res)
}

// commitResult commits c with the summary properties of a compaction and
// adds to res (which holds the plan's figures) what it committed, or the
// attempts made when it gives up.
func (t *Table) commitResult(ctx context.Context, log *slog.Logger, c compactCommit, opts CompactOptions, res *CompactResult) error {
	var rows, live, bytes int64
	for _, df := range c.olds {
		rows += df.Count()
	}
	for _, df := range c.news {
		live, bytes = live+df.Count(), bytes+df.FileSizeBytes()
	}
	props := iceberg.Properties{
		KeyOperation:       OperationCompact,
		KeyCompactID:       uuid.NewString(),
		KeyCompactReplaced: strconv.Itoa(len(c.olds)),
		KeyCompactAdded:    strconv.Itoa(len(c.news)),
		KeyCompactRows:     strconv.FormatInt(rows, 10),
	}
	if len(c.groups) > 0 {
		// Inline, not in a ranges file: one compaction per interval, its
		// spans one interval per Kafka partition for contiguous commits
		// (~15 bytes each), and the archive keeps it with the other floe.
		// properties when the snapshot expires.
		v, err := mapping.EncodeFileGroups(c.groups)
		if err != nil {
			t.removeFiles(ctx, log, c.news)
			return fmt.Errorf("compact %s: %w", t.Name(), err)
		}
		props[mapping.KeyFileGroups] = v
	}
	if t.mode == mapping.ModeUpsert {
		props[KeyCompactLiveRows] = strconv.FormatInt(live, 10)
		props[KeyCompactDroppedDeletes] = strconv.Itoa(len(c.dropDeletes))
	}
	c.props = props
	snap, attempts, err := t.commitCompaction(ctx, log, c, opts)
	res.Attempts += attempts
	if err != nil {
		return err
	}
	res.SnapshotID, res.Commits = snap, res.Commits+1
	res.Added, res.BytesAfter = res.Added+len(c.news), res.BytesAfter+bytes
	if t.mode == mapping.ModeUpsert {
		res.LiveRows += live
	}
	res.FilesAfter += len(c.news) - len(c.olds)
	return nil
}

// onChains returns, for each span whose offsets lie on one unbroken chain
// of ranges of the ledger (mapping.Chain), the offsets of the ranges that
// hold it (its reach, mapping.Chain.Extent), and an empty interval for
// every other span. The ledger is read one commit
// at a time, skipping the archived blocks whose summary shows none of
// them, and taking for its ranges the summary of a block whose ranges
// tile their spans (mapping.Chains.MeetTiled): its memory follows the
// spans asked about, not the ledger's age, and a compaction whose merged
// files span most of the history (the tiers of a long-lived table) reads
// only the blocks that are not tiled, not every block at every run.
func (t *Table) onChains(ctx context.Context, spans []mapping.Span) ([]mapping.Interval, error) {
	var x mapping.Chains
	for _, s := range spans {
		x.Add(s.TopicPartition, s.Interval)
	}
	x.Build()
	if err := t.MeetChains(ctx, 0, &x); err != nil {
		return nil, fmt.Errorf("read the ledger of %s around the offsets planned on: %w", t.Name(), err)
	}
	reach := make([]mapping.Interval, len(spans))
	for i := range spans {
		if c := x.Chain(i); c.OK() {
			reach[i] = c.Extent()
		}
	}
	return reach, nil
}

// MeetChains meets the chains of x (built: mapping.Chains.Build) with the
// ranges of the ledger as of snapshotID (0: the branch head) that may
// meet them, one commit at a time: archived blocks whose summary shows
// none of the chains' offsets are not read, nor those whose summary tiles
// their spans (mapping.Chains.MeetTiled), so that its reads follow the
// chains, not the ledger's age.
func (t *Table) MeetChains(ctx context.Context, snapshotID int64, x *mapping.Chains) error {
	for c, err := range t.commitsWhere(ctx, snapshotID, commitFilter{blocks: x.InSummary, summarized: x.MeetTiled}) {
		if err != nil {
			return err
		}
		for _, r := range c.Ranges {
			x.Meet(r)
		}
	}
	return nil
}

// CompactionGroups returns the file groups a floe compaction snapshot of
// the table (live, or expired and archived) records for the files it
// added (mapping.KeyFileGroups); nil for any other snapshot, and for a
// compaction whose files each hold one Kafka partition. An archived
// compaction's are read from its block of the ledger archive.
func (t *Table) CompactionGroups(ctx context.Context, snapshotID int64) ([]mapping.FileGroup, error) {
	if !t.IsCompaction(snapshotID) {
		return nil, nil
	}
	if s := t.tbl.Metadata().SnapshotByID(snapshotID); s != nil {
		return mapping.FileGroupsOf(snapshotID, s.Summary.Properties)
	}
	props, _, err := t.archivedProperties(ctx, snapshotID)
	if err != nil {
		return nil, fmt.Errorf("file groups of compaction %d of %s: %w", snapshotID, t.Name(), err)
	}
	return mapping.FileGroupsOf(snapshotID, props)
}

// compactFile is a live data file a compaction may merge, with its
// Iceberg partition (partitionKey).
type compactFile struct {
	task      table.FileScanTask
	partition string
}

// compactPiece is what a compaction takes whole: one file that holds one
// Kafka partition (its span: its offset bounds), or every live file of a
// file group (its spans: the group's). Taking a group whole keeps its
// spans exact: no file of a group is ever replaced without the others.
type compactPiece struct {
	files []compactFile
	spans []mapping.Span
	// size is its files' bytes, which a merge's output is cut by; rows
	// their rows, which tiering weighs.
	size, rows int64
	// bin is what pieces merged together share: their Iceberg partitions.
	bin string
	// compacted: a floe compaction wrote its files (tiered).
	compacted bool
	// placed: the ledger was read and places its spans, each on one
	// unbroken chain of ranges: reach[i] is the offsets of the ranges
	// that hold spans[i].
	placed bool
	reach  []mapping.Interval
}

// compactGroup is a set of pieces merged into one file per Iceberg
// partition (or a few, when they come out larger than the target). spans
// are the offsets they hold, merged into intervals. A group of one Kafka
// partition whose spans form one interval writes pure files, placed by
// their bounds as the sink's are; any other is recorded as a file group
// (grouped) on the compaction snapshot, which places its files instead. A
// dead-letter table's group (deadLetters) has no spans and is recorded as
// nothing: its rows carry their commit ids, which is all its readers go by.
type compactGroup struct {
	files       []compactFile
	spans       []mapping.Span
	grouped     bool
	deadLetters bool
}

// String names the group in errors: its first span and how many there are.
func (g compactGroup) String() string {
	if g.deadLetters {
		return fmt.Sprintf("%d dead-letter files from %s", len(g.files), g.files[0].task.File.FilePath())
	}
	if len(g.spans) == 1 {
		return fmt.Sprintf("%s at offsets %s", g.spans[0].TopicPartition, g.spans[0].Interval)
	}
	return fmt.Sprintf("%d spans from %s", len(g.spans), g.spans[0])
}

// compactPlan is what a compaction rewrites.
type compactPlan struct {
	// head is the snapshot planned on, deletes the delete files live in it.
	head    int64
	deletes int64
	groups  []compactGroup
	// live counts the live data files, unplaced the small ones left
	// alone because the ledger does not place them (of the pieces the
	// plan would merge: the others are not looked up), otherSpec the small
	// ones of another partition spec than the table's, foreign the small
	// ones another writer added.
	live, unplaced, otherSpec, foreign int
}

// planCompaction groups the small live data files of the branch head.
// Small files are merged across Kafka partitions: a day of commits of a
// 1,000-partition topic compacts into files of the target size, not into
// a file per partition. A dead-letter table's files are merged without
// reading any ledger (deadLetterGroups).
//
// It lists the files first, from the manifests, and plans on their sizes
// and the file groups; only then does it read, of the ledger, what places
// the pieces the plan merges (onChains), and plans again without those
// the ledger does not place. A table's largest pieces, an earlier
// compaction's outputs, span most of its history, and tiering leaves them
// alone at most compactions: looking them up every time read the whole
// ledger at every compaction of an old table.
func (t *Table) planCompaction(ctx context.Context, target int64) (compactPlan, error) {
	var plan compactPlan
	head := t.Head()
	if head == nil {
		return plan, nil
	}
	plan.head, plan.deletes = head.SnapshotID, summaryCount(head.Summary, "total-delete-files")
	scan := t.tbl.Scan(table.WithSnapshotID(head.SnapshotID))
	defer scan.Close()
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return plan, fmt.Errorf("compact %s: list the data files of snapshot %d: %w", t.Name(), head.SnapshotID, err)
	}
	fields, err := t.positionFields()
	if err != nil {
		return plan, err
	}
	deadLetters := t.tbl.Properties()[PropDeadLettersOf] != ""
	small := target / 4 * 3
	// Only small files are merged: the groups of those are looked up, and
	// a group with a large file is then incomplete and stays as it is.
	files, err := t.Files(ctx, head.SnapshotID)
	if err != nil {
		return plan, fmt.Errorf("compact %s: list the data files of snapshot %d: %w", t.Name(), head.SnapshotID, err)
	}
	compacted := map[string]bool{} // the files a floe compaction wrote
	foreign := map[string]bool{}   // the small files another writer added
	files = slices.DeleteFunc(files, func(f DataFile) bool {
		compacted[f.Path] = t.IsCompaction(f.AddedBy)
		if f.SizeBytes >= small {
			return true
		}
		// A dead-letter table's snapshots are its reconciliation's, which
		// judges the files another writer added itself.
		foreign[f.Path] = !deadLetters && !t.madeByFloe(f.AddedBy)
		return foreign[f.Path]
	})
	// A dead-letter table's files are merged whatever partitions and
	// offsets they hold (deadLetterGroups): no file group of its earlier
	// compactions is taken whole.
	var groups map[string]*mapping.FileGroup
	if !deadLetters {
		if groups, err = t.GroupsOfFiles(ctx, head.SnapshotID, files); err != nil {
			return plan, fmt.Errorf("compact %s: %w", t.Name(), err)
		}
	}
	spec := t.tbl.Spec()
	members := map[*mapping.FileGroup][]compactFile{} // the live files of each group
	var singles []compactFile                         // small mergeable files in no group
	seen := map[string]bool{}
	for _, task := range tasks {
		df := task.File
		if seen[df.FilePath()] {
			continue // one file split into several tasks
		}
		seen[df.FilePath()] = true
		// A file larger than read.split.target-size with several row
		// groups is planned as a task per split: the rewrite reads it
		// whole, as one task, or its row check refused every run.
		task.Start, task.Length = 0, df.FileSizeBytes()
		plan.live++
		if foreign[df.FilePath()] {
			plan.foreign++
			continue
		}
		mergeable := len(task.DeleteFiles)+len(task.EqualityDeleteFiles)+len(task.DeletionVectorFiles) == 0 && df.SpecID() == int32(spec.ID())
		f := compactFile{task: task, partition: partitionKey(spec, df)}
		if g := groups[df.FilePath()]; g != nil {
			if !mergeable {
				members[g] = nil // the group stays as it is
				continue
			}
			if fs, ok := members[g]; ok && fs == nil {
				continue
			}
			members[g] = append(members[g], f)
			continue
		}
		if df.FileSizeBytes() >= small {
			continue // large enough: it stays
		}
		switch {
		case df.SpecID() != int32(spec.ID()):
			plan.otherSpec++
			continue
		case !mergeable:
			plan.unplaced++
			continue
		}
		singles = append(singles, f)
	}
	if deadLetters {
		var unplaced int
		plan.groups, unplaced = deadLetterGroups(singles, compacted, fields, target)
		plan.unplaced += unplaced
		return plan, nil
	}

	sum, err := t.Summary(ctx, 0)
	if err != nil {
		return plan, fmt.Errorf("compact %s: read its ledger summary: %w", t.Name(), err)
	}
	topics := map[int32][]string{} // the ledger's topics that have each partition
	for _, tp := range sum.Partitions() {
		topics[tp.Partition] = append(topics[tp.Partition], tp.Topic)
	}

	// A small file's span is its offset bounds, of each topic whose
	// partition it may hold; one that several topics may hold is the
	// only topic's whose ranges hold its offsets, which the ledger tells
	// first.
	var pieces, ambiguous []compactPiece
	for _, f := range singles {
		df := f.task.File
		piece := compactPiece{files: []compactFile{f}, size: df.FileSizeBytes(), rows: df.Count(), bin: f.partition, compacted: compacted[df.FilePath()]}
		if p, offsets, ok := fields.bounds(df); ok {
			bounds := fields.topicBounds(df)
			for _, topic := range topics[p] {
				if bounds.admit(topic) {
					piece.spans = append(piece.spans, mapping.Span{TopicPartition: mapping.TopicPartition{Topic: topic, Partition: p}, Interval: offsets})
				}
			}
		}
		switch len(piece.spans) {
		case 0:
			plan.unplaced++
		case 1:
			pieces = append(pieces, piece)
		default:
			ambiguous = append(ambiguous, piece)
		}
	}
	if len(ambiguous) > 0 {
		var asked []mapping.Span
		for _, p := range ambiguous {
			asked = append(asked, p.spans...)
		}
		reach, err := t.onChains(ctx, asked)
		if err != nil {
			return plan, fmt.Errorf("compact %s: %w", t.Name(), err)
		}
		for _, p := range ambiguous {
			spans := p.spans
			p.spans = nil
			for _, s := range spans {
				if reach[0].Len() > 0 {
					p.spans, p.reach = append(p.spans, s), append(p.reach, reach[0])
				}
				reach = reach[1:]
			}
			if len(p.spans) != 1 {
				plan.unplaced++
				continue
			}
			p.placed = true
			pieces = append(pieces, p)
		}
	}
	for g, files := range members {
		piece, ok := groupPiece(g, files, small)
		if !ok {
			for _, f := range files {
				if f.task.File.FileSizeBytes() < small {
					plan.unplaced++
				}
			}
			continue
		}
		piece.compacted = compacted[files[0].task.File.FilePath()]
		pieces = append(pieces, piece)
	}
	slices.SortFunc(pieces, func(a, b compactPiece) int {
		return cmp.Or(cmp.Compare(a.bin, b.bin), a.spans[0].TopicPartition.Compare(b.spans[0].TopicPartition), cmp.Compare(a.spans[0].Low, b.spans[0].Low))
	})
	grouped := func(p compactPiece) bool { return groups[p.files[0].task.File.FilePath()] != nil }
	for {
		merged := mergedPieces(pieces, target)
		var asked []mapping.Span
		for _, i := range slices.Concat(merged...) {
			if !pieces[i].placed {
				asked = append(asked, pieces[i].spans...)
			}
		}
		if len(asked) == 0 {
			plan.groups = compactGroups(pieces, merged, grouped)
			return plan, nil
		}
		reach, err := t.onChains(ctx, asked)
		if err != nil {
			return plan, fmt.Errorf("compact %s: %w", t.Name(), err)
		}
		// Pieces the ledger does not place are left alone, and the rest
		// planned again: each round places or drops a piece, so it ends.
		for _, i := range slices.Concat(merged...) {
			p := &pieces[i]
			if p.placed {
				continue
			}
			p.reach, reach = reach[:len(p.spans)], reach[len(p.spans):]
			p.placed = !slices.ContainsFunc(p.reach, func(iv mapping.Interval) bool { return iv.Len() == 0 })
			if !p.placed {
				plan.unplaced += len(p.files)
				p.files = nil
			}
		}
		pieces = slices.DeleteFunc(pieces, func(p compactPiece) bool { return p.files == nil })
	}
}

// deadLetterGroups returns the groups a compaction of a dead-letter table
// rewrites: its small files (singles) merged per Iceberg partition up to
// target, tiered as any table's, in the order of their Kafka partitions
// and offsets. No ledger is read and no file group recorded: the table's
// readers (the reconciliation, the audit, floe dead-letters and where) go
// by each row's commit id and position, never by a file's place on the
// ledger, so a file of many partitions (a commit's dead letters, written
// by bytes) merges with the others, a file per partition of an older floe
// too. A file without position bounds is left alone (unplaced), as its
// rewrite could not be checked.
func deadLetterGroups(singles []compactFile, compacted map[string]bool, fields positionFields, target int64) (groups []compactGroup, unplaced int) {
	type bounded struct {
		piece   compactPiece
		first   int32
		offsets mapping.Interval
	}
	var ps []bounded
	for _, f := range singles {
		df := f.task.File
		first, _, offsets, ok := fields.partitionBounds(df)
		if !ok {
			unplaced++
			continue
		}
		ps = append(ps, bounded{compactPiece{files: []compactFile{f}, size: df.FileSizeBytes(), rows: df.Count(), bin: f.partition, compacted: compacted[df.FilePath()]}, first, offsets})
	}
	slices.SortFunc(ps, func(a, b bounded) int {
		return cmp.Or(cmp.Compare(a.piece.bin, b.piece.bin), cmp.Compare(a.first, b.first), cmp.Compare(a.offsets.Low, b.offsets.Low))
	})
	pieces := make([]compactPiece, len(ps))
	for i, p := range ps {
		pieces[i] = p.piece
	}
	for _, cut := range mergedPieces(pieces, target) {
		g := compactGroup{deadLetters: true}
		for _, i := range cut {
			g.files = append(g.files, pieces[i].files...)
		}
		groups = append(groups, g)
	}
	return groups, unplaced
}

// mergedPieces returns the pieces (sorted by bin, then offsets) that a
// compaction merges, each cut of them (a run of one bin up to target
// bytes, without overlapping offsets) as the indexes of its pieces. A cut
// is merged only when it holds more files than it would write, one per
// Iceberg partition: a file group over several alone (a lane of a
// partitioned table that nothing else joins) would be rewritten into as
// many files, every row for nothing (found by review).
func mergedPieces(pieces []compactPiece, target int64) [][]int {
	var out [][]int
	var cur []int
	var size int64
	// held are the offsets the pieces of cur hold, per partition, for
	// overlaps: comparing each piece's spans with every span of the cut
	// took 37 s for 200 lanes of a 1,000-partition topic.
	held := map[mapping.TopicPartition][]mapping.Interval{}
	cut := func() {
		bin := make([]compactPiece, len(cur))
		for j, i := range cur {
			bin[j] = pieces[i]
		}
		var keep []int
		var files []compactFile
		for _, j := range tiered(bin) {
			keep = append(keep, cur[j])
			files = append(files, pieces[cur[j]].files...)
		}
		if len(files) > icebergPartitions(files) {
			out = append(out, keep)
		}
		cur, size = nil, 0
		clear(held)
	}
	for i, p := range pieces {
		if len(cur) > 0 && (pieces[cur[0]].bin != p.bin || size+p.size > target || overlaps(held, p)) {
			cut()
		}
		cur = append(cur, i)
		size += p.size
		for _, s := range p.spans {
			held[s.TopicPartition] = append(held[s.TopicPartition], s.Interval)
		}
	}
	if len(cur) > 0 {
		cut()
	}
	return out
}

// icebergPartitions counts the Iceberg partitions the files are in.
func icebergPartitions(files []compactFile) int {
	parts := map[string]bool{}
	for _, f := range files {
		parts[f.partition] = true
	}
	return len(parts)
}

// compactGroups returns the groups a compaction rewrites: each cut of
// pieces merged (mergedPieces), with its offsets merged into intervals
// (joinSpans). A cut is recorded as a file group when it spans several
// intervals or one of its pieces is a file group (grouped).
func compactGroups(pieces []compactPiece, merged [][]int, grouped func(compactPiece) bool) []compactGroup {
	out := make([]compactGroup, 0, len(merged))
	for _, cut := range merged {
		var g compactGroup
		var reach []mapping.Interval
		for _, i := range cut {
			p := pieces[i]
			g.files = append(g.files, p.files...)
			g.spans = append(g.spans, p.spans...)
			reach = append(reach, p.reach...)
			g.grouped = g.grouped || grouped(p)
		}
		g.spans = joinSpans(g.spans, reach)
		g.grouped = g.grouped || len(g.spans) > 1
		out = append(out, g)
	}
	return out
}

// joinSpans merges spans (of placed pieces; reach[i] the offsets of the
// ledger ranges that hold spans[i]) into intervals per partition, joining
// two that touch or overlap, and also two whose reaches do: the offsets
// between them then lie in ranges that hold one of them already, which
// rows of no other range can be at. A transactional topic's sink files end
// before a commit marker and the next begins after it, so their bounds
// never touch: joined only where they touched, a compaction of such files
// recorded a span per file, and every tiered re-merge carried them all
// again (found by review). The ranges a group's spans meet stay the same,
// which the file-level audit joins the group's files' rows with.
func joinSpans(spans []mapping.Span, reach []mapping.Interval) []mapping.Span {
	type spanReach struct {
		s mapping.Span
		r mapping.Interval
	}
	ss := make([]spanReach, len(spans))
	for i, s := range spans {
		ss[i] = spanReach{s, s.Interval}
		if i < len(reach) && reach[i].Len() > 0 {
			ss[i].r = reach[i]
		}
	}
	slices.SortFunc(ss, func(a, b spanReach) int {
		return cmp.Or(a.s.TopicPartition.Compare(b.s.TopicPartition), cmp.Compare(a.s.Low, b.s.Low))
	})
	out := make([]mapping.Span, 0, len(ss))
	var last mapping.Interval // the reach of out's last span
	for _, x := range ss {
		if x.s.Len() <= 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].TopicPartition == x.s.TopicPartition && (x.s.Low <= out[n-1].High || x.r.Low <= last.High) {
			out[n-1].High = max(out[n-1].High, x.s.High)
			last = mapping.Interval{Low: min(last.Low, x.r.Low), High: max(last.High, x.r.High)}
			continue
		}
		out, last = append(out, x.s), x.r
	}
	return slices.Clip(out)
}

// tiered returns the pieces of a bin a compaction merges (their
// indexes): a piece an earlier compaction wrote is merged again only with
// at least as many rows of other pieces, so that a row is rewritten about
// once each time the rows around it double (O(log n) times), not at every
// compaction that finds a few new small files beside a large merged one.
// The largest such piece is left out first, until every one left is
// matched. Rows, not bytes: a small file's bytes are mostly its Parquet
// footer and column statistics (~4 KB for a few rows), so a few hundred
// of them outweighed a merged file of 400,000 rows, and the soak's
// compactions rewrote the whole table every time.
func tiered(bin []compactPiece) []int {
	var total int64
	out := make([]int, len(bin))
	for i, p := range bin {
		total += p.rows
		out[i] = i
	}
	for {
		largest := -1
		for j, i := range out {
			if bin[i].compacted && (largest < 0 || bin[i].rows > bin[out[largest]].rows) {
				largest = j
			}
		}
		if largest < 0 || bin[out[largest]].rows <= total-bin[out[largest]].rows {
			return out
		}
		total -= bin[out[largest]].rows
		out = slices.Delete(out, largest, largest+1)
	}
}

// GroupsOfFiles returns the file group of each of files (data files of
// the table as of snapshotID, 0: the branch head) that is in one: the
// groups of the ledger commits and of the floe compactions that added
// them. Of the ledger it reads, one commit at a time, only the commits
// that added one of files and record file groups (the archive's index
// names them, so other blocks are not read): its memory and reads follow
// files, not the ledger's age.
func (t *Table) GroupsOfFiles(ctx context.Context, snapshotID int64, files []DataFile) (map[string]*mapping.FileGroup, error) {
	out := map[string]*mapping.FileGroup{}
	add := func(gs []mapping.FileGroup) {
		for i := range gs {
			for _, f := range gs[i].Files {
				out[f] = &gs[i]
			}
		}
	}
	addedBy := map[int64]bool{} // the ledger commits whose groups are wanted
	read := map[int64]bool{}
	for _, f := range files {
		if !t.IsCompaction(f.AddedBy) {
			addedBy[f.AddedBy] = true
			continue
		}
		if read[f.AddedBy] {
			continue
		}
		read[f.AddedBy] = true
		gs, err := t.CompactionGroups(ctx, f.AddedBy)
		if err != nil {
			return nil, fmt.Errorf("read the file groups of %s: %w", t.Name(), err)
		}
		add(gs)
	}
	for c, err := range t.commitsWhere(ctx, snapshotID, commitFilter{grouped: true, ids: addedBy}) {
		if len(addedBy) == 0 {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the file groups of the ledger of %s: %w", t.Name(), err)
		}
		if addedBy[c.SnapshotID] {
			add(c.FileGroups)
			delete(addedBy, c.SnapshotID)
		}
	}
	return out, nil
}

// groupPiece returns the piece of a file group whose live files are files:
// ok only when every file of the group is live, mergeable and small. (Its
// spans are placed on the ledger when a plan merges it.)
func groupPiece(g *mapping.FileGroup, files []compactFile, small int64) (compactPiece, bool) {
	if len(files) != len(g.Files) {
		return compactPiece{}, false
	}
	piece := compactPiece{files: files, spans: g.Spans}
	parts := map[string]bool{}
	for _, f := range files {
		if f.task.File.FileSizeBytes() >= small {
			return compactPiece{}, false
		}
		piece.size += f.task.File.FileSizeBytes()
		piece.rows += f.task.File.Count()
		parts[f.partition] = true
	}
	// A group in one Iceberg partition merges with that partition's other
	// pieces. One over several (a lane whose rows spread over bucket(N,
	// key), or over an hour's end) merges with any other such group: the
	// merge writes a file per Iceberg partition, as the lane did. Binned
	// by their exact set of partitions, lanes over different sets never
	// merged, and each was rewritten alone into as many files (found by
	// review).
	piece.bin = spreadBin
	if len(parts) == 1 {
		for part := range parts {
			piece.bin = part
		}
	}
	return piece, true
}

// spreadBin is the bin of the file groups whose files are in several
// Iceberg partitions (groupPiece): no partition's key (partitionKey).
const spreadBin = "\x00spread"

// overlaps reports whether a span of p overlaps (not merely touches)
// offsets held (per partition, by the pieces of a cut): rows of the same
// offsets in two files, which a merge must not hide.
func overlaps(held map[mapping.TopicPartition][]mapping.Interval, p compactPiece) bool {
	for _, b := range p.spans {
		for _, a := range held[b.TopicPartition] {
			if a.Low < b.High && b.Low < a.High {
				return true
			}
		}
	}
	return false
}

// partitionKey names a data file's Iceberg partition under spec. Values
// are written Go-quoted: printed plainly, a null and the string "<nil>",
// or two fields' values holding "/" and "=", named one partition (from a
// review). Not their Go types: a value of a column promoted from int to
// long reads as an int32 from older manifests and an int64 from newer
// ones, one partition all the same.
func partitionKey(spec iceberg.PartitionSpec, df iceberg.DataFile) string {
	var b strings.Builder
	for _, pf := range spec.Fields() {
		fmt.Fprintf(&b, "%d=%#v;", pf.FieldID, df.Partition()[pf.FieldID])
	}
	return b.String()
}

// rewriteGroups rewrites the groups, as many at once as there are CPUs (a
// group's Parquet writer uses one), and returns the files written per
// group, also on error.
func (t *Table) rewriteGroups(ctx context.Context, groups []compactGroup, target int64) ([][]iceberg.DataFile, error) {
	written := make([][]iceberg.DataFile, len(groups))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, group := range groups {
		g.Go(func() error {
			var err error
			written[i], err = t.rewriteGroup(gctx, group, target)
			return err
		})
	}
	err := g.Wait()
	return written, err
}

// rewriteGroup writes the rows of a group's files into new files, one
// Iceberg partition at a time, and checks them: the same number of rows,
// of the group's Kafka partitions, within its offsets. It returns the
// files written, also on error.
func (t *Table) rewriteGroup(ctx context.Context, g compactGroup, target int64) ([]iceberg.DataFile, error) {
	var (
		rows    int64
		written []iceberg.DataFile
	)
	byPartition := map[string][]table.FileScanTask{}
	for _, f := range g.files {
		byPartition[f.partition] = append(byPartition[f.partition], f.task)
		rows += f.task.File.Count()
	}
	// The rewrite's files carry the position columns' bounds it is
	// checked by below, whatever the table's metrics settings.
	tbl, err := t.withProperties(t.tbl, positionMetrics)
	if err != nil {
		return nil, err
	}
	for _, key := range slices.Sorted(maps.Keys(byPartition)) {
		tg := table.CompactionTaskGroup{PartitionKey: fmt.Sprintf("%s %s", g, key), Tasks: byPartition[key]}
		for _, task := range tg.Tasks {
			tg.TotalSizeBytes += task.File.FileSizeBytes()
		}
		// One file read at a time, streamed through a one-batch queue: a
		// group holds a few batches in memory rather than whole input
		// files (iceberg-go's defaults read ahead a file per CPU and queue
		// 64 batches), and groups run in parallel instead.
		gr, err := table.ExecuteCompactionGroup(ctx, tbl, tg, table.WithCompactionTargetFileSize(target),
			table.WithCompactionScanConcurrency(1), table.WithCompactionRecordBatchBufferSize(1))
		written = append(written, gr.NewDataFiles...)
		if err != nil {
			return written, fmt.Errorf("compact %s: rewrite %d files of %s: %w", t.Name(), len(tg.Tasks), g, err)
		}
	}
	fields, err := t.positionFields()
	if err != nil {
		return written, err
	}
	first, last, within := g.bounds(fields)
	var got int64
	for _, df := range written {
		got += df.Count()
		pmin, pmax, offsets, ok := fields.partitionBounds(df)
		if !ok || pmin < first || pmax > last || offsets.Low < within.Low || offsets.High > within.High || (!g.grouped && !g.deadLetters && pmin != pmax) {
			return written, fmt.Errorf("compact %s: file %s written for %s has bounds partitions %d to %d offsets %s (or none): refusing to commit it",
				t.Name(), df.FilePath(), g, pmin, pmax, offsets)
		}
	}
	if got != rows {
		return written, fmt.Errorf("compact %s: %d files of %s hold %d rows, their rewrite %d: refusing to commit it",
			t.Name(), len(g.files), g, rows, got)
	}
	return written, nil
}

// bounds returns the Kafka partitions and offsets that g's rewrite may
// hold: those of its spans, or, for a dead-letter table's group, which
// has none, those of its files' bounds (deadLetterGroups plans only files
// that have them).
func (g compactGroup) bounds(fields positionFields) (first, last int32, offsets mapping.Interval) {
	if g.deadLetters {
		for i, f := range g.files {
			pmin, pmax, iv, _ := fields.partitionBounds(f.task.File)
			if i == 0 {
				first, last, offsets = pmin, pmax, iv
				continue
			}
			first, last = min(first, pmin), max(last, pmax)
			offsets = mapping.Interval{Low: min(offsets.Low, iv.Low), High: max(offsets.High, iv.High)}
		}
		return first, last, offsets
	}
	// Spans sort by topic first: a group of two topics is not bounded by
	// its first and last span's partitions.
	first = slices.MinFunc(g.spans, func(a, b mapping.Span) int { return cmp.Compare(a.Partition, b.Partition) }).Partition
	last = slices.MaxFunc(g.spans, func(a, b mapping.Span) int { return cmp.Compare(a.Partition, b.Partition) }).Partition
	offsets.Low = slices.MinFunc(g.spans, func(a, b mapping.Span) int { return cmp.Compare(a.Low, b.Low) }).Low
	offsets.High = slices.MaxFunc(g.spans, func(a, b mapping.Span) int { return cmp.Compare(a.High, b.High) }).High
	return first, last, offsets
}

// compactCommit is what a compaction commits: olds replaced by news, and
// dropDeletes, the delete files the rewrite made obsolete, removed.
type compactCommit struct {
	olds, news, dropDeletes []iceberg.DataFile
	// groups are the file groups of news, recorded on the snapshot
	// (mapping.KeyFileGroups).
	groups []mapping.FileGroup
	// dataSeq, when set, is the data sequence number news get instead of
	// the new snapshot's: the sequence number of the snapshot the rewrite
	// read, so that deletes committed since still apply to them.
	dataSeq *int64
	props   iceberg.Properties
	// check re-validates the plan on the reloaded table before a retry; an
	// error from it gives up (a *CompactConflictError).
	check func(ctx context.Context) error
}

// commitCompaction commits c, retrying on the fresh head when other
// commits got in first. It returns the snapshot and the attempts made. It
// deletes c.news when it gives up knowing that nothing was committed, and
// keeps them (orphans at worst) when the outcome of an attempt is unknown:
// a catalog may still apply a commit after its client gave up on the
// reply (a REST server finishing a request that timed out), and its
// snapshot would then name deleted files. With opts.Turn, each attempt
// holds it (tryCompaction).
func (t *Table) commitCompaction(ctx context.Context, log *slog.Logger, c compactCommit, opts CompactOptions) (int64, int, error) {
	maxAttempts := opts.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = 30
	}
	const maxErrors = 5
	var (
		lastErr error
		errs    int
		// uncertain is set once an attempt failed otherwise than by
		// losing a race: whether the catalog applied it is unknown.
		uncertain bool
	)
	attempt := 1
	for ; attempt <= maxAttempts && errs < maxErrors; attempt++ {
		if attempt > 1 {
			// A lost race means a sink committed: retrying at once is what
			// keeps a compaction from starving beside a sink that commits
			// often (a sink never contends for the files it replaces).
			pause := backoff(attempt)
			if compactConflict(lastErr) {
				pause = rand.N(20 * time.Millisecond)
			}
			if err := sleep(ctx, pause); err != nil {
				return 0, attempt - 1, fmt.Errorf("compact %s: %w (last error: %w)", t.Name(), err, lastErr)
			}
		}
		// The first attempt without a turn commits on the head the plan
		// read; with one, the head has most likely moved since.
		snap, outcome, err := t.tryCompaction(ctx, log, c, opts.Turn, attempt > 1 || opts.Turn != nil, uncertain)
		switch outcome {
		case attemptCommitted:
			return snap, attempt, nil
		case attemptLanded:
			return snap, attempt - 1, nil
		case attemptGaveUp:
			return 0, attempt, err
		case attemptNotReloaded:
			lastErr = err
			errs++
			continue
		}
		lastErr = err
		if ctx.Err() != nil {
			// The outcome of the attempt in flight is unknown: its files
			// may be in the table, so they stay.
			return 0, attempt, fmt.Errorf("compact %s: %w", t.Name(), err)
		}
		if !compactConflict(err) {
			errs++
			uncertain = true
		}
		log.Info("compaction commit failed, reloading to retry on the new head", "table", t.Name(), "attempt", attempt, "err", err)
	}
	attempt--
	if err := t.Refresh(ctx); err != nil {
		return 0, attempt, fmt.Errorf("compact %s: gave up after %d attempts; whether the last one was applied is unknown (its files are orphans if not): %w", t.Name(), attempt, lastErr)
	}
	if snap, landed := t.discardCompaction(ctx, log, c, uncertain); landed {
		return snap, attempt, nil
	}
	if uncertain {
		return 0, attempt, fmt.Errorf("compact %s: gave up after %d attempts; none is in the table, but whether the catalog may still apply one is unknown (its files are kept: orphans if not): %w", t.Name(), attempt, lastErr)
	}
	return 0, attempt, fmt.Errorf("compact %s: gave up after %d attempts, nothing was committed: %w", t.Name(), attempt, lastErr)
}

// discardCompaction deletes the files compaction c wrote, on the table as
// just reloaded, unless c is in it after all: its snapshot in the branch's
// history, or one of its files live in the head. The second is the case
// of an attempt whose outcome was unknown and that landed, after which
// other commits and an expiry removed its snapshot before the retry
// reloaded. It returns the snapshot that added them when c landed. Files
// that a snapshot the table keeps still references (c landed, and a later
// compaction or a rollback took them out of the head, while a kept
// snapshot or a tag still has them) are kept too. Deleting any of those
// would lose rows. When the table's files cannot be read, or an attempt's
// outcome is unknown (uncertain: the catalog may still apply it), nothing
// is deleted: they are orphans at worst.
func (t *Table) discardCompaction(ctx context.Context, log *slog.Logger, c compactCommit, uncertain bool) (int64, bool) {
	if snap := t.compactionSnapshot(c.props[KeyCompactID]); snap != 0 {
		return snap, true
	}
	news := make(map[string]bool, len(c.news))
	for _, df := range c.news {
		news[df.FilePath()] = true
	}
	by, inHead, err := t.referencedBy(ctx, news)
	switch {
	case err != nil:
		log.Warn("compaction not committed, but the table's files could not be read to check that it did not land: keeping the files it wrote (orphans if it did not)", "table", t.Name(), "err", err)
		return 0, false
	case inHead:
		log.Info("compaction found committed by its files: its snapshot was expired since", "table", t.Name(), "snapshot", by)
		return by, true
	case by != 0:
		log.Info("compaction not in the branch's head, but a snapshot the table keeps references its files: keeping them", "table", t.Name(), "added_by", by)
		return 0, false
	case uncertain:
		log.Warn("compaction not committed, but an attempt's outcome is unknown and the catalog may still apply it: keeping the files it wrote (orphans if not; floe maintain --remove-orphans deletes them)", "table", t.Name())
		return 0, false
	}
	t.removeFiles(ctx, log, c.news)
	return 0, false
}

// referencedBy looks for the data files paths among the live files of
// every snapshot the table keeps, the branch's head first (inHead: found
// there), reading each manifest once, and returns the snapshot that added
// the first it finds (0: none).
func (t *Table) referencedBy(ctx context.Context, paths map[string]bool) (by int64, inHead bool, err error) {
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return 0, false, err
	}
	head := t.Head()
	snaps := t.tbl.Metadata().Snapshots()
	if head != nil {
		snaps = append([]table.Snapshot{*head}, snaps...)
	}
	seen := map[string]bool{}
	for i, s := range snaps {
		manifests, err := s.Manifests(fsys)
		if err != nil {
			return 0, false, fmt.Errorf("read manifest list of snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range manifests {
			if m.ManifestContent() != iceberg.ManifestContentData || seen[m.FilePath()] {
				continue
			}
			seen[m.FilePath()] = true
			entries, err := m.FetchEntries(fsys, true)
			if err != nil {
				return 0, false, fmt.Errorf("read manifest %s: %w", m.FilePath(), err)
			}
			for _, e := range entries {
				if paths[e.DataFile().FilePath()] {
					return e.SnapshotID(), head != nil && i == 0, nil
				}
			}
		}
	}
	return 0, false, nil
}

// attemptOutcome is how one commit attempt of a compaction ended.
type attemptOutcome int

const (
	// attemptCommitted: it committed.
	attemptCommitted attemptOutcome = iota
	// attemptLanded: the reload found that an earlier attempt, whose
	// outcome was unknown, had committed.
	attemptLanded
	// attemptNotReloaded: reloading the table failed; nothing was tried.
	attemptNotReloaded
	// attemptGaveUp: the plan cannot be committed any more (its checks
	// failed, or a file it replaces is gone); its files were deleted.
	attemptGaveUp
	// attemptFailed: the commit failed (a lost race, or an error whose
	// outcome may be unknown).
	attemptFailed
)

// tryCompaction makes one commit attempt of c, holding turn (when set)
// throughout. With reload, it first reloads the table, looks for an
// earlier attempt's snapshot and re-checks the plan (c.check). It returns
// the snapshot committed or found, how the attempt ended, and its error.
//
// A compaction of main holds while a publish asks main's writers to
// (AwaitPublish), as a sink does: a compaction commit between a
// publish's check and its swap costs the publish another check, and
// floe maintain --compact run on a schedule could win every one. A
// compaction that held reloads and checks its plan again: the publish
// most often swapped the files it replaces out of main, and it gives up.
func (t *Table) tryCompaction(ctx context.Context, log *slog.Logger, c compactCommit, turn sync.Locker, reload, uncertain bool) (int64, attemptOutcome, error) {
	if held := t.AwaitPublish(ctx, log); held > 0 {
		if err := ctx.Err(); err != nil {
			return 0, attemptNotReloaded, fmt.Errorf("compact %s while holding for a publish: %w", t.Name(), err)
		}
		reload = true
	}
	if turn != nil {
		turn.Lock()
		defer turn.Unlock()
	}
	if reload {
		if err := t.Refresh(ctx); err != nil {
			return 0, attemptNotReloaded, err
		}
		if snap := t.compactionSnapshot(c.props[KeyCompactID]); snap != 0 {
			return snap, attemptLanded, nil
		}
		if err := c.check(ctx); err != nil {
			if snap, landed := t.discardCompaction(ctx, log, c, uncertain); landed {
				return snap, attemptLanded, nil
			}
			return 0, attemptGaveUp, err
		}
	}
	if err := t.checkWrittenFresh(ctx, c.news); err != nil {
		if _, stale := errors.AsType[*CompactStaleFilesError](err); !stale {
			return 0, attemptNotReloaded, err
		}
		if snap, landed := t.discardCompaction(ctx, log, c, uncertain); landed {
			return snap, attemptLanded, nil
		}
		return 0, attemptGaveUp, err
	}
	snap, err := t.commitRewrite(ctx, c)
	switch {
	case err == nil:
		return snap, attemptCommitted, nil
	case strings.Contains(err.Error(), "do not belong to the table"),
		// iceberg-go's answers when a file to replace is no longer
		// live (another compaction, a rollback, or this one's earlier
		// attempt that landed) and when a file to add is live already
		// (that attempt's).
		strings.Contains(err.Error(), "already referenced by table"):
		if snap, landed := t.discardCompaction(ctx, log, c, uncertain); landed {
			return snap, attemptLanded, nil
		}
		return 0, attemptGaveUp, &CompactConflictError{Table: t.Name(), Reason: "a file it replaces is no longer live (another compaction, or a rollback)"}
	case catalog.IsRefused(err):
		// Not applied, and no retry changes it: its files go, unless an
		// earlier attempt's outcome is unknown.
		if snap, landed := t.discardCompaction(ctx, log, c, uncertain); landed {
			return snap, attemptLanded, nil
		}
		return 0, attemptGaveUp, fmt.Errorf("compact %s: the catalog refused the commit, nothing was committed: %w", t.Name(), err)
	}
	return 0, attemptFailed, err
}

// compactMaxFileAge is how old the files a compaction wrote may be when it
// commits them. Orphan removal (floe maintain --remove-orphans) deletes the
// unreferenced data files older than --orphan-min-age, DefaultOrphanMinAge
// by default, and a compaction's files are unreferenced until its commit
// lands: a compaction that spent longer than that rewriting (a large table,
// a slow store) would commit files a cleanup deleted meanwhile, and the
// table would name files that are gone (found by review s63). Half the
// default leaves the cleanup's own listing and the commit their time.
const compactMaxFileAge = DefaultOrphanMinAge / 2

// CompactStaleFilesError reports a compaction that gave up before its
// commit because the files it wrote were gone or older than
// compactMaxFileAge: an orphan cleanup may delete them, or did. Nothing
// was committed.
type CompactStaleFilesError struct {
	Table, Reason string
}

func (e *CompactStaleFilesError) Error() string {
	return fmt.Sprintf("compaction of %s gave up, nothing was committed: %s; floe maintain --remove-orphans deletes unreferenced files older than --orphan-min-age (1h by default), and a compaction's files are unreferenced until it commits them, so it does not commit files older than %s",
		e.Table, e.Reason, compactMaxFileAge)
}

// checkWrittenFresh checks, before a compaction's commit attempt, that
// every file it wrote is still in the table's storage and younger than
// compactMaxFileAge (a *CompactStaleFilesError otherwise): committed, a
// file that a cleanup deleted loses the rows of the files it replaces.
// One stat per file written.
func (t *Table) checkWrittenFresh(ctx context.Context, files []iceberg.DataFile) error {
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("compact %s: open the table's storage: %w", t.Name(), err)
	}
	now := time.Now()
	for _, df := range files {
		info, err := statFile(fsys, df.FilePath())
		if errors.Is(err, fs.ErrNotExist) {
			return &CompactStaleFilesError{Table: t.Name(), Reason: fmt.Sprintf("file %s it wrote is gone (an orphan cleanup deleted it?)", df.FilePath())}
		}
		if err != nil {
			return fmt.Errorf("compact %s: look for file %s it wrote: %w", t.Name(), df.FilePath(), err)
		}
		// The store's clock: an object store refuses requests signed more
		// than 15 minutes off its own, and a multipart upload's
		// Last-Modified (when it began) only errs toward refusing.
		if age := now.Sub(info.ModTime()); age > compactMaxFileAge {
			return &CompactStaleFilesError{Table: t.Name(), Reason: fmt.Sprintf("file %s it wrote is %s old (it took that long to rewrite the files)", df.FilePath(), age.Round(time.Second))}
		}
	}
	return nil
}

// statFile describes the file at path.
func statFile(fsys iceio.IO, path string) (fs.FileInfo, error) {
	if sfs, ok := fsys.(iceio.StatIO); ok {
		return sfs.Stat(path)
	}
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// compactConflict reports whether a compaction's commit lost a race: the
// branch moved (isConflict), or, for a rewrite, iceberg-go's validator saw
// a delete file committed since the rewrite read the table.
func compactConflict(err error) bool {
	return isConflict(err) || errors.Is(err, table.ErrConflictingDeleteFiles)
}

// commitRewrite makes one attempt at committing c on the branch head as
// last loaded.
func (t *Table) commitRewrite(ctx context.Context, c compactCommit) (int64, error) {
	txn := t.tbl.NewTransactionOnBranch(t.branch)
	if err := txn.AssertRefSnapshotID(t.branch); err != nil {
		return 0, err
	}
	rw := txn.NewRewrite(c.props)
	for _, df := range c.olds {
		rw.DeleteFile(df)
	}
	for _, df := range c.dropDeletes {
		rw.DeleteFile(df)
	}
	for _, df := range c.news {
		rw.AddDataFile(df)
	}
	if c.dataSeq != nil {
		rw.DataSequenceNumber(*c.dataSeq)
	}
	if err := rw.Commit(ctx); err != nil {
		return 0, err
	}
	tbl, err := txn.Commit(ctx)
	if err != nil {
		return 0, err
	}
	snap := tbl.Metadata().SnapshotByName(t.branch)
	if snap == nil {
		return 0, fmt.Errorf("compaction committed but branch %s has no head", t.branch)
	}
	if err := t.adoptCommitted(ctx, tbl); err != nil {
		// Committed: a retry's reload finds it by its id.
		return 0, fmt.Errorf("compaction committed, but loading the table it produced failed: %w", err)
	}
	return snap.SnapshotID, nil
}

// compactionSnapshot returns the snapshot in the branch's history that the
// compaction id made, or 0.
func (t *Table) compactionSnapshot(id string) int64 {
	head := t.Head()
	if head == nil {
		return 0
	}
	for _, s := range table.AncestorsOf(head.SnapshotID, t.tbl.Metadata().SnapshotByID) {
		if s.Summary != nil && s.Summary.Properties[KeyCompactID] == id {
			return s.SnapshotID
		}
	}
	return 0
}

// checkCompaction checks a plan against the ledger as reloaded: it still
// holds every chain of ranges the plan's groups span (a rollback, or a
// branch published over the table, may have replaced them). When the
// snapshot planned on is an ancestor of the reloaded head of a data
// table, the commits since only added to its ledger, and the check reads
// no ledger: a sink's compaction checks at every commit attempt, which
// would otherwise cost a pass over the whole ledger, growing with the
// table's age, while the sink waits. Otherwise it reads the ledger commit
// by commit, keeping only the chains of the plan's spans (onChains). A
// dead-letter table's plan spans nothing (deadLetterGroups). That every
// file it replaces is still live, the commit itself checks.
func (t *Table) checkCompaction(ctx context.Context, plan compactPlan) error {
	ancestor, err := t.noDeletesSince(plan)
	if err != nil {
		return err
	}
	if ancestor || t.tbl.Properties()[PropDeadLettersOf] != "" {
		return nil
	}
	var asked []mapping.Span
	for _, g := range plan.groups {
		asked = append(asked, g.spans...)
	}
	reach, err := t.onChains(ctx, asked)
	if err != nil {
		return fmt.Errorf("compact %s: %w", t.Name(), err)
	}
	if i := slices.IndexFunc(reach, func(iv mapping.Interval) bool { return iv.Len() == 0 }); i >= 0 {
		s := asked[i]
		return &CompactConflictError{Table: t.Name(), Reason: fmt.Sprintf("the ledger no longer holds the ranges of %s at offsets %s", s.TopicPartition, s.Interval)}
	}
	return nil
}

// noDeletesSince checks that no delete file was committed since the
// snapshot plan read: the rewritten files would take a sequence number
// above it, and it would no longer apply to the rows they copy (from a
// review: another engine's DELETE landing while a compaction ran brought
// the row back); planned again, the files a delete touches are left alone.
// It reports whether plan.head is an ancestor of the head; when it is not
// (expired since), the head's count of live delete files tells.
func (t *Table) noDeletesSince(plan compactPlan) (ancestor bool, err error) {
	head := t.Head()
	if head == nil {
		return false, nil
	}
	for _, s := range table.AncestorsOf(head.SnapshotID, t.tbl.Metadata().SnapshotByID) {
		if s.SnapshotID == plan.head {
			return true, nil
		}
		if s.Summary == nil || summaryCount(s.Summary, "added-delete-files") > 0 {
			return false, &CompactConflictError{Table: t.Name(), Reason: fmt.Sprintf("snapshot %d, committed since it planned, adds delete files (another writer deleted rows), which must keep applying to the rows it rewrites", s.SnapshotID)}
		}
	}
	if summaryCount(head.Summary, "total-delete-files") > plan.deletes {
		return false, &CompactConflictError{Table: t.Name(), Reason: "delete files were committed since it planned (another writer deleted rows), which must keep applying to the rows it rewrites"}
	}
	return false, nil
}

// summaryCount is a count of a snapshot's summary (0 when absent).
func summaryCount(sum *table.Summary, key string) int64 {
	if sum == nil {
		return 0
	}
	n, _ := strconv.ParseInt(sum.Properties[key], 10, 64)
	return n
}

// CompactAll compacts the table and, when it is a data table, each of its
// dead-letter tables (DeadLetterTables), returning a result per table
// compacted (the data table first). It stops at the first error, but for
// a data table refused for its widened key (*KeyWidenedError) and a
// dead-letter table that lost a file, which are returned after the rest.
func (t *Table) CompactAll(ctx context.Context, opts CompactOptions) ([]CompactResult, error) {
	res, err := t.Compact(ctx, opts)
	out := []CompactResult{res}
	// A data table refused for its widened key (which a person must
	// rebuild) leaves its dead-letter tables, which have no key, to compact.
	_, widened := errors.AsType[*KeyWidenedError](err)
	if err != nil && !widened || t.tbl.Properties()[PropDeadLettersOf] != "" {
		return out, err
	}
	refused := err
	dlqs, err := t.DeadLetterTables(ctx)
	if err != nil {
		return out, errors.Join(refused, err)
	}
	// A dead-letter table whose storage lost a file cannot be compacted
	// until floe maintain drops it; the other ones still are.
	lost := refused
	for _, dlq := range dlqs {
		res, err := dlq.Compact(ctx, opts)
		out = append(out, res)
		if errors.Is(err, fs.ErrNotExist) {
			lost = errors.Join(lost, fmt.Errorf("%w; a data file of dead-letter table %s is gone from its storage: restore it, or run floe maintain --table %s --drop-missing-dead-letter-files (docs/dead-letters.md)", err, dlq.Name(), t.Name()))
			continue
		}
		if err != nil {
			return out, errors.Join(refused, err)
		}
	}
	return out, lost
}
