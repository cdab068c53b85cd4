package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

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
	// left as they are; smaller ones are merged up to it.
	TargetFileSize int64
	// MaxAttempts bounds commit attempts when sinks commit in between;
	// zero means 30.
	MaxAttempts int
	// DryRun plans and reports, and writes nothing.
	DryRun bool
	// Logger receives retries; nil: slog.Default().
	Logger *slog.Logger
}

// CompactResult is what Compact did (or, in a dry run, would do). Its JSON
// field names are stable (floe maintain --json).
type CompactResult struct {
	Table string `json:"table"`
	// SnapshotID is the compaction's snapshot; zero when nothing was
	// rewritten.
	SnapshotID int64 `json:"snapshot_id,omitempty"`
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
	// them, or row-level deletes apply to them).
	Unplaced int `json:"unplaced_files"`
	// Attempts counts commit attempts (sinks committing in between cost
	// one each).
	Attempts int           `json:"attempts"`
	Duration time.Duration `json:"duration_ns"`
}

// ErrCompactConflict is matched (errors.Is) by a *CompactConflictError.
var ErrCompactConflict = errors.New("compaction conflict")

// CompactConflictError reports a compaction given up because the table
// changed under it in a way its plan cannot survive: a file it replaces is
// no longer live (another compaction, a rollback), or the ledger no longer
// holds the ranges its files span. The files it wrote were deleted and
// nothing was committed; running it again plans on the new table.
type CompactConflictError struct {
	Table, Reason string
}

func (e *CompactConflictError) Error() string {
	return fmt.Sprintf("compaction of %s gave up, nothing was committed: %s; run it again", e.Table, e.Reason)
}

func (e *CompactConflictError) Is(target error) bool { return target == ErrCompactConflict }

// ErrCompactUnsupported is returned for a table Compact does not rewrite: a
// state table (mapping.ModeFold), whose folds rewrite its files themselves.
var ErrCompactUnsupported = errors.New("compaction not supported")

// IsCompaction reports whether a snapshot of the table, live or expired
// and archived, is a compaction floe made.
func (t *Table) IsCompaction(snapshotID int64) bool {
	s := t.tbl.Metadata().SnapshotByID(snapshotID)
	if s == nil {
		s = t.archive.snapshot(snapshotID)
	}
	return s != nil && s.Summary != nil && s.Summary.Properties[KeyOperation] == OperationCompact
}

// Compact rewrites the small data files of the table's branch into larger
// ones, in one snapshot that replaces them (Iceberg operation "replace"),
// leaving the ledger as it is.
//
// Files are merged per Kafka partition and Iceberg partition (of the
// current spec), so every file stays pure, and only files whose offsets
// lie on one unbroken chain of ledger ranges (mapping.SpanIndex.Span) are
// merged: a merged file's offset bounds then cover ranges that hold rows
// and nothing else (no gap, no lost or aborted range), which is what the
// file-level audit checks it against. Files are taken in offset order and
// one merged file never spans the offsets of a file of its partition that
// it leaves alone. A dead-letter table is compacted the same way, on its
// data table's ledger.
//
// Compact runs beside live sinks: a commit in between makes its commit
// fail its branch assertion, and it reloads, checks that the ledger still
// holds every chain, and commits the same files again (the commit itself
// refuses a file to replace that is no longer live); when either check
// fails it deletes its files and returns a *CompactConflictError. A sink's commit that loses to it
// retries, never fenced: a compaction moves no ledger range. A crash
// leaves the written files as orphans (floe maintain --remove-orphans);
// the replaced files stay reachable from older snapshots until snapshot
// expiry deletes them.
func (t *Table) Compact(ctx context.Context, opts CompactOptions) (CompactResult, error) {
	start := time.Now()
	res := CompactResult{Table: t.Name()}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	target := opts.TargetFileSize
	if target <= 0 {
		target = DefaultTargetFileSize
	}
	if err := t.Refresh(ctx); err != nil {
		return res, err
	}
	switch t.mode {
	case mapping.ModeAppend:
	case mapping.ModeFold:
		return res, fmt.Errorf("compact %s: it is a state table (%s=%s), whose folds rewrite its files themselves: %w", t.Name(), mapping.PropFold, mapping.FoldLatest, ErrCompactUnsupported)
	default:
		// Rewriting an upsert table's files would have to apply its
		// deletes to them first.
		return res, fmt.Errorf("compact %s: this floe compacts append tables, and it is of mode %s: %w", t.Name(), t.mode, ErrCompactUnsupported)
	}
	ix, err := t.compactionLedger(ctx)
	if err != nil {
		return res, err
	}
	plan, err := t.planCompaction(ctx, ix, target)
	if err != nil {
		return res, err
	}
	res.FilesBefore, res.FilesAfter, res.Unplaced, res.Groups = plan.live, plan.live, plan.unplaced, len(plan.groups)
	for _, g := range plan.groups {
		res.Replaced += len(g.files)
		for _, f := range g.files {
			res.Rows += f.task.File.Count()
			res.BytesBefore += f.task.File.FileSizeBytes()
		}
	}
	if len(plan.groups) == 0 || opts.DryRun {
		res.FilesAfter -= res.Replaced - res.Groups // a group makes about one file
		res.Duration = time.Since(start)
		return res, nil
	}

	news, err := t.rewriteGroups(ctx, plan.groups, target)
	if err != nil {
		t.removeFiles(ctx, log, news)
		return res, err
	}
	var olds []iceberg.DataFile
	for _, g := range plan.groups {
		for _, f := range g.files {
			olds = append(olds, f.task.File)
		}
	}
	res.Added = len(news)
	for _, df := range news {
		res.BytesAfter += df.FileSizeBytes()
	}
	id := uuid.NewString()
	props := iceberg.Properties{
		KeyOperation:       OperationCompact,
		KeyCompactID:       id,
		KeyCompactReplaced: strconv.Itoa(len(olds)),
		KeyCompactAdded:    strconv.Itoa(len(news)),
		KeyCompactRows:     strconv.FormatInt(res.Rows, 10),
	}
	snap, attempts, err := t.commitCompaction(ctx, log, plan, olds, news, props, opts.MaxAttempts)
	res.Attempts = attempts
	if err != nil {
		return res, err
	}
	res.SnapshotID = snap
	res.FilesAfter = res.FilesBefore - len(olds) + len(news)
	res.Duration = time.Since(start)
	log.Info("compacted", "table", t.Name(), "snapshot", snap, "replaced", len(olds), "added", len(news), "rows", res.Rows, "attempts", attempts)
	return res, nil
}

// compactionLedger indexes the ledger the table's files are placed on: its
// own, or its data table's for a dead-letter table.
func (t *Table) compactionLedger(ctx context.Context) (mapping.SpanIndex, error) {
	owner := t
	if of := t.tbl.Properties()[PropDeadLettersOf]; of != "" {
		data, err := Open(ctx, t.cat, identOf(of), OpenOptions{})
		if err != nil {
			return mapping.SpanIndex{}, fmt.Errorf("compact dead-letter table %s: open its data table %s for the ledger: %w", t.Name(), of, err)
		}
		owner = data
	}
	l, err := owner.Ledger()
	if err != nil {
		return mapping.SpanIndex{}, fmt.Errorf("compact %s: read the ledger of %s: %w", t.Name(), owner.Name(), err)
	}
	return l.SpanIndex(), nil
}

// compactFile is a live data file a compaction may merge.
type compactFile struct {
	task    table.FileScanTask
	offsets mapping.Interval
}

// compactGroup is a set of files of one Kafka partition and one Iceberg
// partition, in offset order, merged into one file (or a few, when they
// come out larger than the target). span is the offsets they hold.
type compactGroup struct {
	tp        mapping.TopicPartition
	partition string
	files     []compactFile
	span      mapping.Interval
}

// compactPlan is what a compaction rewrites.
type compactPlan struct {
	groups []compactGroup
	// live counts the live data files, unplaced the small ones left
	// alone because the ledger does not place them.
	live, unplaced int
}

// planCompaction groups the small live data files of the branch head.
func (t *Table) planCompaction(ctx context.Context, ix mapping.SpanIndex, target int64) (compactPlan, error) {
	var plan compactPlan
	head := t.Head()
	if head == nil {
		return plan, nil
	}
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
	spec := t.tbl.Spec()
	topics := map[int32][]string{} // the ledger's topics that have each partition
	for _, tp := range ix.Partitions() {
		topics[tp.Partition] = append(topics[tp.Partition], tp.Topic)
	}
	small := target / 4 * 3
	type key struct {
		tp        mapping.TopicPartition
		partition string
	}
	byKey := map[key][]compactFile{}
	seen := map[string]bool{}
	for _, task := range tasks {
		df := task.File
		if seen[df.FilePath()] {
			continue // one file split into several tasks
		}
		seen[df.FilePath()] = true
		plan.live++
		p, offsets, ok := fields.bounds(df)
		var tps []mapping.TopicPartition
		if ok && len(task.DeleteFiles)+len(task.EqualityDeleteFiles)+len(task.DeletionVectorFiles) == 0 && df.SpecID() == int32(spec.ID()) {
			bounds := fields.topicBounds(df)
			for _, topic := range topics[p] {
				tp := mapping.TopicPartition{Topic: topic, Partition: p}
				if _, ok := ix.Span(tp, offsets); ok && bounds.admit(topic) {
					tps = append(tps, tp)
				}
			}
		}
		if len(tps) != 1 {
			if df.FileSizeBytes() < small {
				plan.unplaced++
			}
			continue
		}
		k := key{tp: tps[0], partition: partitionKey(spec, df)}
		byKey[k] = append(byKey[k], compactFile{task: task, offsets: offsets})
	}
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b key) int {
		return cmp.Or(a.tp.Compare(b.tp), cmp.Compare(a.partition, b.partition))
	})
	for _, k := range keys {
		files := byKey[k]
		slices.SortFunc(files, func(a, b compactFile) int { return cmp.Compare(a.offsets.Low, b.offsets.Low) })
		var cur []compactFile
		var size int64
		cut := func() {
			if len(cur) >= 2 {
				plan.groups = append(plan.groups, compactGroup{tp: k.tp, partition: k.partition, files: cur,
					span: mapping.Interval{Low: cur[0].offsets.Low, High: cur[len(cur)-1].offsets.High}})
			}
			cur, size = nil, 0
		}
		for _, f := range files {
			fsize := f.task.File.FileSizeBytes()
			if fsize >= small {
				// Large enough: it stays, and no merged file spans it.
				cut()
				continue
			}
			if len(cur) > 0 {
				last := cur[len(cur)-1]
				_, chained := ix.Span(k.tp, mapping.Interval{Low: cur[0].offsets.Low, High: f.offsets.High})
				if f.offsets.Low < last.offsets.High || !chained || size+fsize > target {
					cut()
				}
			}
			cur = append(cur, f)
			size += fsize
		}
		cut()
	}
	return plan, nil
}

// partitionKey names a data file's Iceberg partition under spec.
func partitionKey(spec iceberg.PartitionSpec, df iceberg.DataFile) string {
	var b strings.Builder
	for _, pf := range spec.Fields() {
		fmt.Fprintf(&b, "%s=%v/", pf.Name, df.Partition()[pf.FieldID])
	}
	return b.String()
}

// rewriteGroups rewrites the groups, as many at once as there are CPUs (a
// group's Parquet writer uses one), and returns the files written, also
// on error.
func (t *Table) rewriteGroups(ctx context.Context, groups []compactGroup, target int64) ([]iceberg.DataFile, error) {
	var (
		mu      sync.Mutex
		written []iceberg.DataFile
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, group := range groups {
		g.Go(func() error {
			files, err := t.rewriteGroup(gctx, group, target)
			mu.Lock()
			written = append(written, files...)
			mu.Unlock()
			return err
		})
	}
	err := g.Wait()
	return written, err
}

// rewriteGroup writes the rows of a group's files into new files and checks
// them: the same number of rows, of the group's Kafka partition, within its
// offsets. It returns the files written, also on error.
func (t *Table) rewriteGroup(ctx context.Context, g compactGroup, target int64) ([]iceberg.DataFile, error) {
	tg := table.CompactionTaskGroup{PartitionKey: fmt.Sprintf("%s %s", g.tp, g.partition)}
	var rows int64
	for _, f := range g.files {
		tg.Tasks = append(tg.Tasks, f.task)
		tg.TotalSizeBytes += f.task.File.FileSizeBytes()
		rows += f.task.File.Count()
	}
	// One file read at a time, streamed through a one-batch queue: a
	// group holds a few batches in memory rather than whole input files
	// (iceberg-go's defaults read ahead a file per CPU and queue 64
	// batches), and groups run in parallel instead.
	gr, err := table.ExecuteCompactionGroup(ctx, t.tbl, tg, table.WithCompactionTargetFileSize(target),
		table.WithCompactionScanConcurrency(1), table.WithCompactionRecordBatchBufferSize(1))
	if err != nil {
		return gr.NewDataFiles, fmt.Errorf("compact %s: rewrite %d files of %s at offsets %s: %w", t.Name(), len(g.files), g.tp, g.span, err)
	}
	fields, err := t.positionFields()
	if err != nil {
		return gr.NewDataFiles, err
	}
	var got int64
	for _, df := range gr.NewDataFiles {
		got += df.Count()
		p, offsets, ok := fields.bounds(df)
		if !ok || p != g.tp.Partition || offsets.Low < g.span.Low || offsets.High > g.span.High {
			return gr.NewDataFiles, fmt.Errorf("compact %s: file %s written for %s at offsets %s has bounds partition %d offsets %s (or none): refusing to commit it",
				t.Name(), df.FilePath(), g.tp, g.span, p, offsets)
		}
	}
	if got != rows {
		return gr.NewDataFiles, fmt.Errorf("compact %s: %d files of %s at offsets %s hold %d rows, their rewrite %d: refusing to commit it",
			t.Name(), len(g.files), g.tp, g.span, rows, got)
	}
	return gr.NewDataFiles, nil
}

// commitCompaction commits the replacement of olds by news, retrying on
// the fresh head when other commits got in first. It returns the
// snapshot and the attempts made. It deletes news when it gives up
// knowing that nothing was committed, and keeps them (orphans at worst)
// when the outcome is unknown.
func (t *Table) commitCompaction(ctx context.Context, log *slog.Logger, plan compactPlan, olds, news []iceberg.DataFile, props iceberg.Properties, maxAttempts int) (int64, int, error) {
	if maxAttempts <= 0 {
		maxAttempts = 30
	}
	const maxErrors = 5
	id := props[KeyCompactID]
	var (
		lastErr error
		errs    int
	)
	attempt := 1
	for ; attempt <= maxAttempts && errs < maxErrors; attempt++ {
		if attempt > 1 {
			// A lost race means a sink committed: retrying at once is what
			// keeps a compaction from starving beside a sink that commits
			// often (a sink never contends for the files it replaces).
			pause := backoff(attempt)
			if isConflict(lastErr) {
				pause = rand.N(20 * time.Millisecond)
			}
			if err := sleep(ctx, pause); err != nil {
				return 0, attempt - 1, fmt.Errorf("compact %s: %w (last error: %w)", t.Name(), err, lastErr)
			}
			if err := t.Refresh(ctx); err != nil {
				lastErr = err
				errs++
				continue
			}
			if snap := t.compactionSnapshot(id); snap != 0 {
				return snap, attempt - 1, nil
			}
			if err := t.checkCompaction(ctx, plan); err != nil {
				t.removeFiles(ctx, log, news)
				return 0, attempt - 1, err
			}
		}
		snap, err := t.commitRewrite(ctx, olds, news, props)
		if err == nil {
			return snap, attempt, nil
		}
		if strings.Contains(err.Error(), "do not belong to the table") {
			// iceberg-go's answer when a file to replace is no longer
			// live: another compaction (or a rollback) got there first.
			t.removeFiles(ctx, log, news)
			return 0, attempt, &CompactConflictError{Table: t.Name(), Reason: "a file it replaces is no longer live (another compaction, or a rollback)"}
		}
		lastErr = err
		if ctx.Err() != nil {
			// The outcome of the attempt in flight is unknown: its files
			// may be in the table, so they stay.
			return 0, attempt, fmt.Errorf("compact %s: %w", t.Name(), err)
		}
		if !isConflict(err) {
			errs++
		}
		log.Info("compaction commit failed, reloading to retry on the new head", "table", t.Name(), "attempt", attempt, "err", err)
	}
	attempt--
	if err := t.Refresh(ctx); err != nil {
		return 0, attempt, fmt.Errorf("compact %s: gave up after %d attempts; whether the last one was applied is unknown (its files are orphans if not): %w", t.Name(), attempt, lastErr)
	}
	if snap := t.compactionSnapshot(id); snap != 0 {
		return snap, attempt, nil
	}
	t.removeFiles(ctx, log, news)
	return 0, attempt, fmt.Errorf("compact %s: gave up after %d attempts, nothing was committed: %w", t.Name(), attempt, lastErr)
}

// commitRewrite makes one attempt at committing the rewrite on the branch
// head as last loaded.
func (t *Table) commitRewrite(ctx context.Context, olds, news []iceberg.DataFile, props iceberg.Properties) (int64, error) {
	txn := t.tbl.NewTransactionOnBranch(t.branch)
	if err := txn.AssertRefSnapshotID(t.branch); err != nil {
		return 0, err
	}
	rw := txn.NewRewrite(props)
	for _, df := range olds {
		rw.DeleteFile(df)
	}
	for _, df := range news {
		rw.AddDataFile(df)
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
// branch published over the table, may have replaced them). That every
// file it replaces is still live, the commit itself checks.
func (t *Table) checkCompaction(ctx context.Context, plan compactPlan) error {
	ix, err := t.compactionLedger(ctx)
	if err != nil {
		return err
	}
	for _, g := range plan.groups {
		if _, ok := ix.Span(g.tp, g.span); !ok {
			return &CompactConflictError{Table: t.Name(), Reason: fmt.Sprintf("the ledger no longer holds the ranges of %s at offsets %s", g.tp, g.span)}
		}
	}
	return nil
}

// CompactAll compacts the table and, when it is a data table, each of its
// dead-letter tables (DeadLetterTables), returning a result per table
// compacted (the data table first). It stops at the first error.
func (t *Table) CompactAll(ctx context.Context, opts CompactOptions) ([]CompactResult, error) {
	res, err := t.Compact(ctx, opts)
	out := []CompactResult{res}
	if err != nil || t.tbl.Properties()[PropDeadLettersOf] != "" {
		return out, err
	}
	dlqs, err := t.DeadLetterTables(ctx)
	if err != nil {
		return out, err
	}
	for _, dlq := range dlqs {
		res, err := dlq.Compact(ctx, opts)
		out = append(out, res)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
