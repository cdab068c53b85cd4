package snapshot

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/table/compaction"
)

// KeyCompactDroppedDeletes counts the delete files a compaction of an
// upsert table removed, and KeyCompactLiveRows the rows its new files
// hold (KeyCompactRows being the rows of the files it replaced, before
// deletes).
const (
	KeyCompactDroppedDeletes = "floe.compact.dropped-delete-files"
	KeyCompactLiveRows       = "floe.compact.live-rows"
)

// deletesGroup is the data files of one Iceberg partition that a
// compaction of an upsert table rewrites, every scan task of each (a
// large file may be planned as several).
type deletesGroup struct {
	partition string
	files     []iceberg.DataFile
	tasks     []table.FileScanTask
}

// deletesPlan is what a compaction of an upsert table rewrites, on the
// branch head it read (base).
type deletesPlan struct {
	base   *table.Snapshot
	groups []deletesGroup
	live   int
}

// KeyWidenedError refuses to compact an upsert table one of whose key
// columns was widened (an int made a long, by a floe before it kept key
// column types, or by another engine): iceberg-go v0.7.0's scan compares
// an equality delete's key with a data file's column as the file stores
// it, so the deletes written since do not reach the rows written before,
// and a rewrite through it would make those rows (old values of updated
// keys, deleted keys) the table for every reader.
type KeyWidenedError struct {
	Table, Column string
	From, To      iceberg.Type
}

func (e *KeyWidenedError) Error() string {
	return fmt.Sprintf("compact %s: its key column %s was widened from %s to %s, and iceberg-go does not apply the deletes written since to the rows written before: a compaction would bring back deleted keys and old values, so floe does not compact this table; replay it into a new table, which keeps the type of its key columns (docs/upsert.md, key column types)",
		e.Table, e.Column, e.From, e.To)
}

// checkKeyNotWidened returns a *KeyWidenedError when an earlier schema of
// the upsert table t gave one of its key columns another type.
func (t *Table) checkKeyNotWidened() error {
	cur := t.tbl.Schema()
	for _, id := range cur.IdentifierFieldIDs {
		f, ok := cur.FindFieldByID(id)
		if !ok {
			continue
		}
		for _, s := range t.tbl.Metadata().Schemas() {
			if old, ok := s.FindFieldByID(id); ok && !old.Type.Equals(f.Type) {
				return &KeyWidenedError{Table: t.Name(), Column: f.Name, From: old.Type, To: f.Type}
			}
		}
	}
	return nil
}

// checkNoForeignChanges refuses to compact an upsert table whose live
// data or delete files another writer added: the rewrite applies every
// delete and drops them, so another writer's delete of a key (or its file
// of rows) would become part of a floe compaction, and the audit, which
// reports them, would then see the table complete (found by review).
func (t *Table) checkNoForeignChanges(ctx context.Context) error {
	head := t.Head()
	if head == nil {
		return nil
	}
	dels, err := t.DeleteFiles(ctx, head.SnapshotID)
	if err != nil {
		return fmt.Errorf("compact %s: list its delete files: %w", t.Name(), err)
	}
	for _, d := range dels {
		if !t.madeByFloe(d.AddedBy) {
			return fmt.Errorf("compact %s: snapshot %d, not floe's, added delete file %s: a compaction applies the deletes and drops them, which would hide that change from floe audit (which reports it); rebuild the table with floe replay, or roll that change back: %w",
				t.Name(), d.AddedBy, d.Path, ErrCompactUnsupported)
		}
	}
	files, err := t.Files(ctx, head.SnapshotID)
	if err != nil {
		return fmt.Errorf("compact %s: list its data files: %w", t.Name(), err)
	}
	for _, f := range files {
		if !t.madeByFloe(f.AddedBy) {
			return fmt.Errorf("compact %s: snapshot %d, not floe's, added data file %s: a compaction would merge its rows into a floe file, which would hide that change from floe audit (which reports it); rebuild the table with floe replay, or roll that change back: %w",
				t.Name(), f.AddedBy, f.Path, ErrCompactUnsupported)
		}
	}
	return nil
}

// compactDeletes is Compact for an upsert table: it rewrites data files
// with the table's row-level deletes applied (read with iceberg-go's scan,
// which applies equality deletes, position deletes and deletion vectors)
// and drops the delete files that then apply to no live data file, in
// snapshots that move no ledger range: one, or one per part of at most
// CompactOptions.CommitBytes (deletesParts), the dropped delete files with
// the last.
//
// In each Iceberg partition (of the current spec) it rewrites every data
// file that a delete applies to, and the small ones beside them; a
// partition with no deletes and fewer than two small files is left alone.
// An equality delete applies to every older data file of its partition,
// so this rewrites most of the table: it is the major compaction that
// keeps reads from paying for the deletes of every update since.
//
// Sequence numbers make it safe beside a live sink. The new files keep
// the data sequence number of the snapshot the rewrite read (base), so an
// equality delete a sink commits after base still applies to them: a key
// the sink updates or deletes meanwhile is neither duplicated nor
// resurrected. A delete file is dropped only when no data file left in
// the table is older than it (compaction.CollectDeadEqualityDeletesWithSpecs
// on base, the rewritten files excluded): deletes committed after base
// stay. When a commit of another writer gets in first, iceberg-go's
// rewrite validator refuses (a concurrent delete file) or the branch
// assertion fails; it reloads and commits the same files again on the new
// head, unless a snapshot since base added position deletes or deletion
// vectors naming a file it replaces, or a file it replaces or drops is no
// longer live: then it gives up (*CompactConflictError).
func (t *Table) compactDeletes(ctx context.Context, opts CompactOptions, log *slog.Logger, target int64, start time.Time) (CompactResult, error) {
	res := CompactResult{Table: t.Name(), deletes: true}
	if err := t.checkKeyNotWidened(); err != nil {
		return res, err
	}
	if err := t.checkNoForeignChanges(ctx); err != nil {
		return res, err
	}
	plan, err := t.planDeletes(ctx, target)
	if err != nil {
		return res, err
	}
	rewritten := map[string]struct{}{}
	for _, g := range plan.groups {
		for _, df := range g.files {
			rewritten[df.FilePath()] = struct{}{}
		}
	}
	res.FilesBefore, res.FilesAfter = plan.live, plan.live
	res.replacingDeletes(plan.groups)
	if plan.base == nil {
		res.Duration = time.Since(start)
		return res, nil
	}
	// With no file to rewrite, the delete files that apply to no data file
	// (a flush's deletes of keys it wrote first) still go: the table's
	// files are then the table, for readers without deletes (floe files).
	drop, err := t.deadDeletes(ctx, plan.base, rewritten)
	if err != nil {
		return res, err
	}
	res.DroppedDeletes = len(drop)
	if len(plan.groups) == 0 && len(drop) == 0 {
		res.Duration = time.Since(start)
		return res, nil
	}
	if opts.DryRun {
		res.FilesAfter -= res.Replaced - res.Groups
		res.Duration = time.Since(start)
		return res, nil
	}
	parts := deletesParts(plan.groups, cmp.Or(opts.CommitBytes, DefaultCompactCommitBytes))
	if len(parts) == 0 {
		parts = [][]deletesGroup{nil} // the delete files alone
	}
	var prev int64 // the snapshot of the part committed last
	committed := func(groups []deletesGroup) {
		res.replacingDeletes(groups)
		res.DroppedDeletes = 0 // they go with the last part
	}
	err = commitParts(t, log, parts, &res, committed, func(i int, part []deletesGroup) error {
		// The dead deletes go with the last part: until then files they
		// apply to are still live.
		var dropped []iceberg.DataFile
		if i == len(parts)-1 {
			dropped = drop
		}
		if err := t.compactDeletesPart(ctx, log, plan.base, prev, part, dropped, target, opts, &res); err != nil {
			return err
		}
		prev = res.SnapshotID
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Duration = time.Since(start)
	log.Info("compacted", res.LogAttrs()...)
	return res, nil
}

// compactDeletesPart rewrites groups, part of a compaction of an upsert
// table planned on base, with their deletes applied, and commits them
// with the delete files drop, adding what it committed to res. Every
// part's files get base's data sequence number, whatever parts committed
// before it: the deletes the rewrite applied are those of base, and the
// ones committed since, by sinks or as this compaction's earlier parts
// (which add none), must still apply to them.
//
// prev is the snapshot of the part committed before this one (0 for the
// first): it must still be in the branch's history (live or archived)
// when a retry reloads. A rollback to base, or to a snapshot between base
// and prev, passes checkDeletesSince (base is still an ancestor) but makes
// the files the earlier parts replaced live again, and the last part
// drops the delete files they need (found by review s65: the old values
// of every key of those files, and keys deleted since them, came back).
func (t *Table) compactDeletesPart(ctx context.Context, log *slog.Logger, base *table.Snapshot, prev int64, groups []deletesGroup, drop []iceberg.DataFile, target int64, opts CompactOptions, res *CompactResult) error {
	var olds []iceberg.DataFile
	rewritten := map[string]struct{}{}
	for _, g := range groups {
		olds = append(olds, g.files...)
		for _, df := range g.files {
			rewritten[df.FilePath()] = struct{}{}
		}
	}
	news, err := t.rewriteDeletes(ctx, groups, target)
	if err != nil {
		t.removeFiles(ctx, log, news)
		return err
	}
	seq := base.SequenceNumber
	c := compactCommit{olds: olds, news: news, dropDeletes: drop, dataSeq: &seq,
		check: func(ctx context.Context) error {
			if err := t.checkDeletesSince(ctx, base, rewritten); err != nil {
				return err
			}
			if head := t.Head(); prev != 0 && (head == nil || !t.archivedAncestor(head.SnapshotID, prev)) {
				return &CompactConflictError{Table: t.Name(), Reason: fmt.Sprintf("snapshot %d, its part committed before this one, is no longer in the history of branch %s (a rollback): the files it replaced are live again, with the deletes they need", prev, t.branch)}
			}
			return nil
		}}
	return t.commitResult(ctx, log, c, opts, res)
}

// replacingDeletes is replacing for the groups of an upsert table's
// compaction.
func (r *CompactResult) replacingDeletes(groups []deletesGroup) {
	var files []iceberg.DataFile
	for _, g := range groups {
		files = append(files, g.files...)
	}
	r.replacingFiles(len(groups), files)
}

// deletesParts cuts groups, in their order, into the parts a compaction
// of an upsert table commits one by one: runs of files adding up to at
// most limit bytes (a larger file alone). A group larger than limit is
// cut between its files, each piece a group of the same partition: a
// file's live rows are its rows less the deletes that apply to it, so
// its rewrite does not depend on the other files of its partition.
func deletesParts(groups []deletesGroup, limit int64) [][]deletesGroup {
	var (
		parts [][]deletesGroup
		size  int64
	)
	for _, g := range groups {
		tasks := map[string][]table.FileScanTask{}
		for _, task := range g.tasks {
			tasks[task.File.FilePath()] = append(tasks[task.File.FilePath()], task)
		}
		piece := -1 // g's piece in the last part, if any
		for _, df := range g.files {
			if len(parts) == 0 || (size > 0 && size+df.FileSizeBytes() > limit) {
				parts, size, piece = append(parts, nil), 0, -1
			}
			last := &parts[len(parts)-1]
			if piece < 0 {
				*last, piece = append(*last, deletesGroup{partition: g.partition}), len(*last)
			}
			p := &(*last)[piece]
			p.files = append(p.files, df)
			p.tasks = append(p.tasks, tasks[df.FilePath()]...)
			size += df.FileSizeBytes()
		}
	}
	return parts
}

// planDeletes groups, per Iceberg partition of the current spec, the data
// files of the branch head to rewrite: those a delete applies to, and the
// small ones beside them. Files of an older spec are left alone (their
// deletes too: they still apply to them).
func (t *Table) planDeletes(ctx context.Context, target int64) (deletesPlan, error) {
	plan := deletesPlan{base: t.Head()}
	if plan.base == nil {
		return plan, nil
	}
	scan := t.tbl.Scan(table.WithSnapshotID(plan.base.SnapshotID))
	defer scan.Close()
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return plan, fmt.Errorf("compact %s: list the data files of snapshot %d: %w", t.Name(), plan.base.SnapshotID, err)
	}
	spec := t.tbl.Spec()
	small := target / 4 * 3
	type file struct {
		df      iceberg.DataFile
		tasks   []table.FileScanTask
		deleted bool
	}
	files := map[string]*file{}
	var order []string
	for _, task := range tasks {
		f := files[task.File.FilePath()]
		if f == nil {
			f = &file{df: task.File}
			files[task.File.FilePath()] = f
			order = append(order, task.File.FilePath())
		}
		f.tasks = append(f.tasks, task)
		f.deleted = f.deleted || len(task.DeleteFiles)+len(task.EqualityDeleteFiles)+len(task.DeletionVectorFiles) > 0
	}
	plan.live = len(files)
	byPartition := map[string][]*file{}
	for _, path := range order {
		f := files[path]
		if f.df.SpecID() != int32(spec.ID()) || (!f.deleted && f.df.FileSizeBytes() >= small) {
			continue
		}
		k := partitionKey(spec, f.df)
		byPartition[k] = append(byPartition[k], f)
	}
	for _, k := range slices.Sorted(maps.Keys(byPartition)) {
		fs := byPartition[k]
		if !slices.ContainsFunc(fs, func(f *file) bool { return f.deleted }) && len(fs) < 2 {
			continue
		}
		g := deletesGroup{partition: k}
		for _, f := range fs {
			g.files = append(g.files, f.df)
			g.tasks = append(g.tasks, f.tasks...)
		}
		plan.groups = append(plan.groups, g)
	}
	return plan, nil
}

// deadDeletes lists the delete files of base that apply to no data file
// once the rewritten ones are replaced: equality deletes no older
// surviving data file of their partition needs, position deletes and
// deletion vectors whose every target is rewritten.
func (t *Table) deadDeletes(ctx context.Context, base *table.Snapshot, rewritten map[string]struct{}) ([]iceberg.DataFile, error) {
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("compact %s: open the table's storage: %w", t.Name(), err)
	}
	survey := rewritten
	if len(survey) == 0 {
		// iceberg-go answers an empty set with no dead deletes at all; a
		// path no file has makes it survey every data file.
		survey = map[string]struct{}{"": {}}
	}
	eq, err := compaction.CollectDeadEqualityDeletesWithSpecs(ctx, fsys, t.tbl.Metadata(), base, survey)
	if err != nil {
		return nil, fmt.Errorf("compact %s: find the equality deletes the rewrite makes obsolete: %w", t.Name(), err)
	}
	pos, err := table.CollectDeadPositionDeletes(ctx, fsys, base, rewritten)
	if err != nil {
		return nil, fmt.Errorf("compact %s: find the position deletes the rewrite makes obsolete: %w", t.Name(), err)
	}
	seen := map[string]bool{}
	var out []iceberg.DataFile
	for _, df := range slices.Concat(eq, pos) {
		if !seen[df.FilePath()] {
			seen[df.FilePath()] = true
			out = append(out, df)
		}
	}
	slices.SortFunc(out, func(a, b iceberg.DataFile) int { return cmp.Compare(a.FilePath(), b.FilePath()) })
	return out, nil
}

// rewriteDeletes writes the live rows of each group's files (deletes
// applied) into new files, a group at a time (the equality deletes a read
// applies are held in memory, once per group), and returns the files
// written, also on error. It checks that no group comes out with more rows
// than it read.
func (t *Table) rewriteDeletes(ctx context.Context, groups []deletesGroup, target int64) ([]iceberg.DataFile, error) {
	// The rewrite's files carry the position columns' bounds, whatever
	// the table's metrics settings (positionMetrics).
	tbl, err := t.withProperties(t.tbl, positionMetrics)
	if err != nil {
		return nil, err
	}
	var written []iceberg.DataFile
	for _, g := range groups {
		tg := table.CompactionTaskGroup{PartitionKey: g.partition, Tasks: g.tasks}
		var rows int64
		for _, df := range g.files {
			tg.TotalSizeBytes += df.FileSizeBytes()
			rows += df.Count()
		}
		gr, err := table.ExecuteCompactionGroup(ctx, tbl, tg, table.WithCompactionTargetFileSize(target),
			table.WithCompactionScanConcurrency(1), table.WithCompactionRecordBatchBufferSize(1))
		written = append(written, gr.NewDataFiles...)
		if err != nil {
			return written, fmt.Errorf("compact %s: rewrite %d files of partition %q with their deletes applied: %w", t.Name(), len(g.files), g.partition, err)
		}
		var got int64
		for _, df := range gr.NewDataFiles {
			got += df.Count()
		}
		if got > rows {
			return written, fmt.Errorf("compact %s: %d files of partition %q hold %d rows, their rewrite %d: refusing to commit it",
				t.Name(), len(g.files), g.partition, rows, got)
		}
	}
	return written, nil
}

// checkDeletesSince is a compaction's check before it retries on a
// reloaded head: base must still be in the branch's history, and no
// snapshot since may have added a position delete or deletion vector that
// names a file it rewrites (or names no file): the rewrite did not apply
// it, and dropping the file it targets would lose it. Equality deletes
// committed since need no check: they keep applying to the new files,
// which have base's data sequence number.
func (t *Table) checkDeletesSince(ctx context.Context, base *table.Snapshot, rewritten map[string]struct{}) error {
	head := t.Head()
	if head == nil {
		return &CompactConflictError{Table: t.Name(), Reason: "the branch has no snapshot any more"}
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("compact %s: open the table's storage: %w", t.Name(), err)
	}
	meta := t.tbl.Metadata()
	for _, s := range table.AncestorsOf(head.SnapshotID, meta.SnapshotByID) {
		if s.SnapshotID == base.SnapshotID {
			return nil
		}
		if s.Summary != nil && s.Summary.Properties["added-position-delete-files"] == "" && s.Summary.Properties["added-delete-files"] == s.Summary.Properties["added-equality-delete-files"] {
			continue // no position delete in it
		}
		manifests, err := s.Manifests(fsys)
		if err != nil {
			return fmt.Errorf("compact %s: read the manifests of snapshot %d: %w", t.Name(), s.SnapshotID, err)
		}
		for _, m := range manifests {
			if m.ManifestContent() != iceberg.ManifestContentDeletes || m.SnapshotID() != s.SnapshotID {
				continue
			}
			for e, err := range m.Entries(fsys, true) {
				if err != nil {
					return fmt.Errorf("compact %s: read manifest %s: %w", t.Name(), m.FilePath(), err)
				}
				df := e.DataFile()
				if e.Status() != iceberg.EntryStatusADDED || e.SnapshotID() != s.SnapshotID || df.ContentType() != iceberg.EntryContentPosDeletes {
					continue
				}
				if err := t.positionDeleteConflict(df, fmt.Sprintf("snapshot %d added position deletes", s.SnapshotID), rewritten); err != nil {
					return err
				}
			}
		}
	}
	if t.archivedAncestor(head.SnapshotID, base.SnapshotID) {
		// base expired since the plan read it (a long compaction beside a
		// busy sink outlives its snapshot), and with it the snapshots after
		// it that expired too: their position deletes still act only if
		// live in the head, where they are looked for.
		return t.checkLivePositionDeletes(ctx, rewritten)
	}
	return &CompactConflictError{Table: t.Name(), Reason: fmt.Sprintf("snapshot %d it read is no longer in the history of branch %s (a rollback, or a branch published over it)", base.SnapshotID, t.branch)}
}

// archivedAncestor reports whether snapshot id is an ancestor of head,
// live or archived: whether it left the metadata by an expiry, not by a
// rollback.
func (t *Table) archivedAncestor(head, id int64) bool {
	_, found := table.AncestorsBetween(head, id, snapshotIn(t.tbl.Metadata(), t.archive))
	return found
}

// checkLivePositionDeletes is checkDeletesSince's check when the snapshots
// since base expired: no live position delete may name a file it rewrites
// (or name no file). One that base already held is refused too: it cannot
// be told apart, and floe writes none.
func (t *Table) checkLivePositionDeletes(ctx context.Context, rewritten map[string]struct{}) error {
	var conflict error
	err := t.liveEntries(ctx, 0, iceberg.ManifestContentDeletes, func(e iceberg.ManifestEntry) {
		if df := e.DataFile(); conflict == nil && df.ContentType() == iceberg.EntryContentPosDeletes {
			conflict = t.positionDeleteConflict(df, "live position deletes", rewritten)
		}
	})
	if err != nil {
		return fmt.Errorf("compact %s: read the live delete files: %w", t.Name(), err)
	}
	return conflict
}

// positionDeleteConflict is a *CompactConflictError when position deletes
// df (what names them) delete rows of a file the rewrite replaces, or name
// no file (they may), and nil otherwise.
func (t *Table) positionDeleteConflict(df iceberg.DataFile, what string, rewritten map[string]struct{}) error {
	ref := df.ReferencedDataFile()
	if ref == nil {
		return &CompactConflictError{Table: t.Name(), Reason: fmt.Sprintf("%s %s that may name a file it rewrites", what, df.FilePath())}
	}
	if _, ok := rewritten[*ref]; ok {
		return &CompactConflictError{Table: t.Name(), Reason: fmt.Sprintf("%s to %s, a file it rewrites", what, *ref)}
	}
	return nil
}
