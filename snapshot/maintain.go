package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	floecat "github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
)

// DefaultOrphanMinAge is how old an unreferenced data file must be before
// Maintain deletes it. A writer writes its files before it commits them, so
// a young unreferenced file may be about to be committed; an hour is far
// beyond any floe commit (files written, then at most a few retries).
const DefaultOrphanMinAge = time.Hour

// MaintainOptions say what Maintain does.
type MaintainOptions struct {
	// Expire expires snapshots older than ExpireOlderThan, keeping at least
	// RetainLast (at least 1) per branch; branch and tag heads are always
	// kept.
	Expire          bool
	ExpireOlderThan time.Duration
	RetainLast      int
	// RemoveOrphans deletes data files under the table's data location
	// that no snapshot references, metadata files no table version will
	// reference (RemoveStaleMetadata), ledger archive files the table
	// does not name whose entries it still holds (staleArchives) and
	// ranges files no snapshot references (staleRangesFiles), all older
	// than OrphanMinAge (zero: DefaultOrphanMinAge).
	RemoveOrphans bool
	// RemoveDebris deletes only the stale metadata, ledger archive and
	// ranges files RemoveOrphans deletes (one listing of the metadata
	// folder, no manifest read): what a sink's own maintenance collects
	// (AutoMaintain).
	RemoveDebris bool
	OrphanMinAge time.Duration
	// DropMissingDeadLetterFiles removes from the dead-letter tables the
	// data files their storage no longer has (*DeadLetterFilesLostError),
	// so that readers can scan them again and reconciling goes on: the
	// dead letters in those files are lost for good, and the audit names
	// their commits. Data tables' files are never dropped: replay them.
	DropMissingDeadLetterFiles bool
	// DryRun reports what would be done and changes nothing.
	DryRun bool
	// Logger receives retries and cleanup failures; nil: slog.Default().
	Logger *slog.Logger
}

// MaintainResult reports what Maintain did (or, in a dry run, would do).
//
// Its JSON field names are stable (floe maintain --json); empty lists and
// an empty Archive are left out.
type MaintainResult struct {
	// TruncatedRefs are the branches and tags whose ledger was truncated
	// (an overlapping maintain run was killed before its repair) and that
	// Maintain repaired from the archive files before anything else;
	// Restored are the archived snapshots the repair put back into the
	// table's archive.
	TruncatedRefs []string `json:"truncated_refs,omitempty"`
	Restored      []int64  `json:"restored,omitempty"`
	// Expired are the ids of the expired snapshots, oldest first;
	// ExpiredCommits how many of them were floe commits.
	Expired        []int64 `json:"expired,omitempty"`
	ExpiredCommits int     `json:"expired_commits"`
	// Segments are the ledger archive segments the table names afterwards
	// and Archived the number of snapshots they hold; a dry run leaves
	// both as they were.
	Segments []string `json:"archive_segments,omitempty"`
	Archived int      `json:"archived"`
	// Orphans are the unreferenced data files deleted, OrphanBytes their
	// size.
	Orphans     []string `json:"orphans,omitempty"`
	OrphanBytes int64    `json:"orphan_bytes"`
	// StaleMetadata are the metadata files deleted that no table version
	// will reference, StaleManifests the manifests and manifest lists no
	// snapshot references, StaleArchives the ledger archive files deleted
	// that the table does not name, with their index files.
	StaleMetadata  []string `json:"stale_metadata,omitempty"`
	StaleManifests []string `json:"stale_manifests,omitempty"`
	StaleArchives  []string `json:"stale_archives,omitempty"`
	// StaleRangesFiles are the ranges files deleted that no snapshot
	// references, live or archived (staleRangesFiles).
	StaleRangesFiles []string `json:"stale_ranges_files,omitempty"`
	// DeadLetters is what reconciling the dead-letter tables with the
	// data table's ledger did (ReconcileDeadLetters), before anything
	// else; a dry run does not reconcile.
	DeadLetters Reconciled `json:"dead_letters"`
	// DroppedDeadLetterFiles are the data files the dead-letter tables'
	// storage had lost that it dropped (DropMissingDeadLetterFiles).
	DroppedDeadLetterFiles []string `json:"dropped_dead_letter_files,omitempty"`
	// DeadLetterTables, for a data table, is what the same maintenance did
	// to each of its dead-letter tables (Table.DeadLetterTables), by name.
	DeadLetterTables map[string]*MaintainResult `json:"dead_letter_tables,omitempty"`
}

// GCDisabledError reports a table with gc.enabled=false: its files may be
// shared with other tables, so Maintain neither expires its snapshots (which
// deletes the files only they reference) nor deletes orphans.
type GCDisabledError struct{ Table string }

func (e *GCDisabledError) Error() string {
	return fmt.Sprintf("table %s has %s=false (its files may be shared with other tables): maintenance does not expire or delete its files; set %s=true if the table owns its files",
		e.Table, table.GCEnabledKey, table.GCEnabledKey)
}

// Maintain expires snapshots and deletes orphan files without losing the
// ledger: the ledger entries of the snapshots an expiry removes are
// written to a new ledger archive segment first, and the same catalog
// commit that removes the snapshots names that segment
// (PropLedgerSegmentPrefix). When the segment cannot be written, nothing
// is expired. A concurrent commit (a sink) makes the expiry commit fail
// its branch assertions; Maintain then reloads and computes the expiry
// again. Overlapping maintain runs (floe maintain, sinks' AutoMaintain)
// each add a segment of their own and never remove one they did not read,
// so none loses another's entries.
//
// Whatever the options, Maintain first repairs a truncated ledger that the
// archive files can repair (repairLedger): floe before archive segments
// left one when overlapping runs replaced each other's archive and the
// run that should repair it was killed.
func (t *Table) Maintain(ctx context.Context, opts MaintainOptions) (MaintainResult, error) {
	if err := t.writable("maintain"); err != nil {
		return MaintainResult{}, err
	}
	var res MaintainResult
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := t.Refresh(ctx); err != nil {
		return res, err
	}
	if err := t.repairLedger(ctx, log, opts.DryRun, &res); err != nil {
		return res, err
	}
	// Damage that reconciling cannot repair is returned after the rest of
	// the maintenance: expiry keeps every file a ledger lists, and a
	// sink's own maintenance must keep the metadata bounded meanwhile.
	var damage error
	// A dry run reports what a drop would remove, unless the ledger is
	// truncated (see below).
	if !opts.DryRun || (opts.DropMissingDeadLetterFiles && len(res.TruncatedRefs) == 0) {
		err := t.reconcileDeadLetterTables(ctx, log, opts, &res)
		if IsDeadLetterDamage(err) {
			damage = err
		} else if err != nil {
			return res, err
		}
	}
	if err := t.upkeep(ctx, log, opts, &res); err != nil {
		return res, err
	}
	if t.tbl.Properties()[PropDeadLettersOf] != "" || (opts.DryRun && len(res.TruncatedRefs) > 0) {
		// A dry run leaves a truncated ledger unrepaired: the dead-letter
		// tables could not be read against it.
		return res, damage
	}
	// A data table's dead-letter tables are maintained with it, as
	// reconciled above: their metadata grows with every commit that has
	// dead letters.
	dlqs, err := t.DeadLetterTables(ctx)
	if err != nil {
		return res, err
	}
	for _, dlq := range dlqs {
		var dres MaintainResult
		if err := dlq.upkeep(ctx, log, opts, &dres); err != nil {
			return res, fmt.Errorf("maintain dead-letter table %s of %s: %w", dlq.Name(), t.Name(), err)
		}
		if res.DeadLetterTables == nil {
			res.DeadLetterTables = map[string]*MaintainResult{}
		}
		res.DeadLetterTables[dlq.Name()] = &dres
	}
	return res, damage
}

// upkeep is Maintain's work on one table after the ledger's repair and
// the reconciliation of dead letters: expiry and cleanup.
func (t *Table) upkeep(ctx context.Context, log *slog.Logger, opts MaintainOptions, res *MaintainResult) error {
	if v, ok := t.tbl.Properties()[table.GCEnabledKey]; ok && strings.EqualFold(v, "false") {
		return &GCDisabledError{Table: t.Name()}
	}
	removeDebris := opts.RemoveOrphans || opts.RemoveDebris
	if opts.RemoveOrphans {
		// Before the expiry, so that a refused run changes nothing.
		if err := t.checkOrphanLocation(); err != nil {
			return err
		}
	}
	if removeDebris {
		// Data orphans can still be removed safely.
		var le *MetadataLocationError
		if err := t.checkMetadataLocation(); errors.As(err, &le) {
			log.Warn("not removing stale metadata and ledger archive files", "table", t.Name(), "err", err)
			removeDebris = false
		}
	}
	if opts.Expire {
		if err := t.expire(ctx, log, opts, res); err != nil {
			return err
		}
	}
	if !opts.DryRun {
		if err := t.writeMissingIndexes(ctx); err != nil {
			return err
		}
	}
	for _, seg := range t.segments {
		res.Segments = append(res.Segments, seg.path)
	}
	res.Archived = t.archive.Len()
	age := opts.OrphanMinAge
	if age <= 0 {
		age = DefaultOrphanMinAge
	}
	if opts.RemoveOrphans {
		if err := t.removeOrphans(ctx, log, age, opts.DryRun, res); err != nil {
			return err
		}
	}
	if removeDebris {
		if err := t.removeDebris(ctx, log, age, opts.DryRun, res); err != nil {
			return err
		}
	}
	return nil
}

// expire runs the archive-then-expire commit, retrying lost races.
func (t *Table) expire(ctx context.Context, log *slog.Logger, opts MaintainOptions, res *MaintainResult) error {
	// The expired snapshots' files are deleted by deleteExpired, not by
	// iceberg-go's post-commit step.
	expOpts := []table.ExpireSnapshotsOpt{table.WithOlderThan(opts.ExpireOlderThan), table.WithRetainLast(max(opts.RetainLast, 1)),
		table.WithPostCommit(false)}
	const maxAttempts = 10
	var lastErr error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return fmt.Errorf("expire snapshots of %s: %w (last error: %w)", t.Name(), err, lastErr)
			}
			if err := t.Refresh(ctx); err != nil {
				return err
			}
		}
		keep, err := t.keptFiles(ctx)
		if err != nil {
			return err
		}
		pre := t.tbl
		txn := pre.NewTransaction()
		if err := txn.ExpireSnapshots(expOpts...); err != nil {
			return fmt.Errorf("plan snapshot expiry of %s: %w", t.Name(), err)
		}
		staged, err := txn.StagedTable()
		if err != nil {
			return fmt.Errorf("plan snapshot expiry of %s: %w", t.Name(), err)
		}
		var expired []table.Snapshot
		for _, s := range t.tbl.Metadata().Snapshots() {
			if staged.Metadata().SnapshotByID(s.SnapshotID) == nil {
				expired = append(expired, s)
			}
		}
		if len(expired) == 0 {
			return nil
		}
		res.Expired, res.ExpiredCommits = res.Expired[:0], 0
		for _, s := range expired {
			res.Expired = append(res.Expired, s.SnapshotID)
			if s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) {
				res.ExpiredCommits++
			}
		}
		plan, err := t.planSegment(expired)
		if err != nil {
			return fmt.Errorf("archive the ledger entries of the snapshots to expire from %s (nothing was expired): %w", t.Name(), err)
		}
		// A dry run reads what the expiry would merge: it fails where
		// the expiry would.
		var (
			path   string
			ix     *segmentIndex
			digest segmentDigest
		)
		if opts.DryRun {
			err = plan.read(ctx, t.tbl)
		} else {
			path, ix, digest, err = plan.write(ctx, t.tbl)
		}
		if err != nil {
			if path != "" {
				t.removePaths(ctx, log, segmentFiles(path)...)
			}
			var gone *segmentReadError
			if errors.As(err, &gone) && errors.Is(err, fs.ErrNotExist) {
				// Another writer's expiry absorbed a segment this one
				// was merging, and deleted it: a lost race, planned
				// again on the reloaded table (the fault campaign's
				// floe maintain beside its members' in-sink expiries).
				lastErr = err
				log.Info("a ledger segment to merge was merged by another writer, reloading", "table", t.Name(), "attempt", attempt, "err", err)
				continue
			}
			if opts.DryRun {
				return fmt.Errorf("merge the ledger archive segments of %s: %w", t.Name(), err)
			}
			return &ArchiveError{Table: t.Name(), Path: path, Err: fmt.Errorf("write: %w (nothing was expired)", err)}
		}
		if opts.DryRun {
			return nil
		}
		seg := segment{key: segmentKey(path), path: path, digest: digest, ix: ix}
		if err := t.stageSegment(txn, seg, plan.absorbed); err != nil {
			t.removePaths(ctx, log, segmentFiles(path)...)
			return err
		}
		tbl, err := txn.Commit(ctx)
		if err == nil {
			if err := deleteExpired(ctx, t, pre, tbl, expired, keep); err != nil {
				// The expiry is in; files left behind are orphans that
				// --remove-orphans deletes.
				log.Warn("snapshots expired, but deleting their files failed", "table", t.Name(), "err", err)
			}
		}
		if err != nil && isConflict(err) {
			// Nothing was committed: the new segment is unreferenced.
			t.removePaths(ctx, log, segmentFiles(path)...)
			lastErr = err
			log.Info("expiry commit lost a race, reloading", "table", t.Name(), "attempt", attempt, "err", err)
			continue
		}
		if err != nil {
			// The outcome is unknown: the segment may be named now, so it
			// stays, and so do the ones it absorbed.
			return fmt.Errorf("commit snapshot expiry of %s (outcome unknown; run floe maintain again): %w", t.Name(), err)
		}
		return t.adoptSegment(ctx, log, tbl, seg, plan.absorbed)
	}
	return fmt.Errorf("expire snapshots of %s: gave up after %d attempts: %w", t.Name(), maxAttempts, lastErr)
}

// deleteExpired deletes the files that only the expired snapshots of
// pre (the table before the expiry, post after it) referenced: their
// manifest lists, their manifests that no retained snapshot lists, and
// the data and delete files those manifests hold live that no retained
// manifest holds live, except those of keep (nil for a data table): the
// dead-letter files a data-table snapshot still names (keptFiles), which
// the undo of a rollback adds again. It differs from iceberg-go's
// post-commit step in two ways. It skips a manifest's DELETED entries:
// the files a compaction replaced were deleted by the expiry of the
// snapshots that held them live, and a later expiry of the compaction
// tried them again, each a "no such file" failure. And a file already
// gone counts as deleted, so a run after a crashed one finishes quietly.
// It reads what it must only: the retained snapshots' manifest lists,
// oldest first, until every manifest of the expired ones is found
// retained (the usual case: a commit carries its parent's manifests
// over), and the retained manifests' entries only when an unretained
// manifest held live files.
func deleteExpired(ctx context.Context, t *Table, pre, post *table.Table, expired []table.Snapshot, keep fileSet) error {
	fsys, err := t.fsys(ctx)
	if err != nil {
		return err
	}
	var others []string // manifest lists, manifests, statistics
	candidates := map[string]iceberg.ManifestFile{}
	expiredIDs := map[int64]bool{}
	for _, s := range expired {
		expiredIDs[s.SnapshotID] = true
		others = append(others, s.ManifestList)
		mans, err := s.Manifests(fsys)
		if err != nil {
			return fmt.Errorf("list the manifests of expired snapshot %d: %w", s.SnapshotID, err)
		}
		for _, m := range mans {
			candidates[m.FilePath()] = m
		}
	}
	retained := slices.SortedFunc(slices.Values(post.Metadata().Snapshots()), func(a, b table.Snapshot) int {
		return cmp.Compare(a.SequenceNumber, b.SequenceNumber)
	})
	retainedMans := map[string]iceberg.ManifestFile{}
	read := 0 // retained snapshots whose manifest lists were read
	readRetained := func(until func() bool) error {
		for ; read < len(retained) && !until(); read++ {
			mans, err := retained[read].Manifests(fsys)
			if err != nil {
				return fmt.Errorf("list the manifests of retained snapshot %d: %w", retained[read].SnapshotID, err)
			}
			for _, m := range mans {
				retainedMans[m.FilePath()] = m
				delete(candidates, m.FilePath())
			}
		}
		return nil
	}
	if err := readRetained(func() bool { return len(candidates) == 0 }); err != nil {
		return err
	}
	files := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(candidates)) {
		others = append(others, p)
		for e, err := range candidates[p].Entries(fsys, false) {
			if err != nil {
				return fmt.Errorf("read manifest %s of an expired snapshot: %w", p, err)
			}
			if e.Status() != iceberg.EntryStatusDELETED {
				files[e.DataFile().FilePath()] = true
			}
		}
	}
	if len(files) > 0 {
		if err := readRetained(func() bool { return false }); err != nil {
			return err
		}
		for p, m := range retainedMans {
			for e, err := range m.Entries(fsys, false) {
				if err != nil {
					return fmt.Errorf("read retained manifest %s: %w", p, err)
				}
				if e.Status() != iceberg.EntryStatusDELETED {
					delete(files, e.DataFile().FilePath())
				}
			}
		}
	}
	for sf := range pre.Metadata().Statistics() {
		if expiredIDs[sf.SnapshotID] && sf.StatisticsPath != "" {
			others = append(others, sf.StatisticsPath)
		}
	}
	for psf := range pre.Metadata().PartitionStatistics() {
		if expiredIDs[psf.SnapshotID] && psf.StatisticsPath != "" {
			others = append(others, psf.StatisticsPath)
		}
	}
	stats := map[string]bool{}
	for sf := range post.Metadata().Statistics() {
		stats[sf.StatisticsPath] = true
	}
	for psf := range post.Metadata().PartitionStatistics() {
		stats[psf.StatisticsPath] = true
	}
	var errs []error
	remove := func(p string) {
		if keep.has(p) || stats[p] {
			return
		}
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, p := range others {
		remove(p)
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		remove(p)
	}
	return errors.Join(errs...)
}

// fileSet is a set of file paths, each known by its location without a
// scheme (floecat.LocationKey).
type fileSet map[string]bool

func (s fileSet) add(p string)      { s[floecat.LocationKey(p)] = true }
func (s fileSet) has(p string) bool { return s[floecat.LocationKey(p)] }

// keptFiles returns, for a dead-letter table, the files that its data
// table's commits name for it, in the snapshots the data table has (a
// rolled-back commit's among them: the rollback may be undone) and in its
// branches' and tags' ledgers (archived commits whose dead letters are
// pending, or that a tag pins): no cleanup deletes them. Nil for a data table, or one whose data table is
// gone.
func (t *Table) keptFiles(ctx context.Context) (fileSet, error) {
	of := t.tbl.Properties()[PropDeadLettersOf]
	if of == "" {
		return nil, nil
	}
	data, err := Open(ctx, t.cat, identOf(of), OpenOptions{})
	if errors.Is(err, ErrTableNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s, whose dead letters %s holds, for the files it names: %w", of, t.Name(), err)
	}
	keep := fileSet{}
	add := func(c mapping.Commit) {
		if c.DeadLetterTable == t.Name() {
			for _, p := range c.DeadLetterFiles {
				keep.add(p)
			}
		}
	}
	for _, s := range data.tbl.Metadata().Snapshots() {
		if s.Summary == nil || !mapping.IsFloeCommit(s.Summary.Properties) {
			continue
		}
		c, err := data.ranges.commit(&s)
		if err != nil {
			return nil, fmt.Errorf("read commit of snapshot %d of %s: %w", s.SnapshotID, of, err)
		}
		add(c)
	}
	// A tag's too: main set back to a tag (a rollback undone, the
	// snapshots in between expired) needs its commits' files again.
	commits, err := data.deadLetterCommits(ctx, t.Name())
	if err != nil {
		return nil, fmt.Errorf("read the ledgers of %s for the files they name: %w", of, err)
	}
	for _, c := range commits {
		add(c)
	}
	// A snapshot the data table keeps that no ref reaches (main rolled
	// back below it) may be set back as main: its ledger names the dead
	// letters of its ancestors that expiry archived, which must stay too
	// (review s61: maintain expired the older rolled-back commits, kept a
	// younger one, and deleted the older ones' dead-letter files).
	if commits, err = data.rolledBackDeadLetterCommits(ctx, t.Name()); err != nil {
		return nil, fmt.Errorf("read the ledgers of the rolled-back snapshots of %s for the files they name: %w", of, err)
	}
	for _, c := range commits {
		add(c)
	}
	return keep, nil
}

// rolledBackDeadLetterCommits returns the commits naming the dead-letter
// table dlq on the lines rollbacks left (unreachedTips), each line read
// from its tip down to the first snapshot a branch or tag reaches, or one
// another line's walk read: the ledger below is a ref's, which
// deadLetterCommits reads, or that line's. Reading each tip's whole
// ledger made a dead-letter table's maintenance with 100 such lines
// several times slower than without (docs/performance.md). A line with a
// gap (another tool expired a snapshot of it) is not floe's to restore:
// skipped.
func (t *Table) rolledBackDeadLetterCommits(ctx context.Context, dlq string) ([]mapping.Commit, error) {
	var out []mapping.Commit
	err := t.reloadingOnAbsorbed(ctx, func() error {
		out = nil
		meta := t.tbl.Metadata()
		tips := unreachedTips(meta)
		if len(tips) == 0 {
			return nil
		}
		// The archived part of the refs' ledgers too: a line may join a
		// ref's history below what the table keeps. Its snapshots of
		// other writers are not parts, so a walk through one goes on to
		// the floe commit below it.
		reached := reachedByRefs(meta)
		for name, ref := range meta.Refs() {
			parts, err := t.ledgerParts(ref.SnapshotID)
			if err != nil {
				return fmt.Errorf("ref %s: %w", name, err)
			}
			for _, p := range parts {
				if p.snap != nil {
					reached[p.snap.SnapshotID] = true
				}
				for _, id := range p.commitIDs() {
					reached[id] = true
				}
			}
		}
		read := map[int64]bool{}
		var fsys iceio.IO
		for _, tip := range tips {
			line, walked, ok := t.rolledBackLine(meta, tip, dlq, func(id int64) bool { return reached[id] || read[id] })
			if !ok {
				continue
			}
			maps.Copy(read, walked)
			for _, p := range line {
				cs, err := t.decode(ctx, &fsys, p)
				if err != nil {
					return fmt.Errorf("snapshot %d: %w", tip, err)
				}
				for _, c := range cs {
					if c.DeadLetterTable == dlq && len(c.DeadLetterFiles) > 0 {
						out = append(out, c)
					}
				}
			}
		}
		return nil
	})
	return out, err
}

// rolledBackLine walks the ancestry of tip through the live snapshots of
// meta and the archive down to the first snapshot below that counted
// returns true for, or the table's first, and returns the ledger parts
// of its floe commits (the archived ones only when they name the
// dead-letter table dlq) and the snapshots walked; ok is false when the
// walk met a gap or a cycle of parents.
func (t *Table) rolledBackLine(meta table.Metadata, tip int64, dlq string, counted func(int64) bool) (line []ledgerPart, walked map[int64]bool, ok bool) {
	walked = map[int64]bool{}
	for cur := tip; !counted(cur); {
		if walked[cur] {
			return nil, nil, false
		}
		walked[cur] = true
		if s := meta.SnapshotByID(cur); s != nil {
			if s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) {
				line = append(line, ledgerPart{snap: s})
			}
			if s.ParentSnapshotID == nil {
				break
			}
			cur = *s.ParentSnapshotID
			continue
		}
		e, at, found := t.archive.find(cur)
		if !found {
			return nil, nil, false
		}
		if e.floeCommit() && at.ix.deadLetterTable(at.block, at.entry) == dlq {
			// Consecutive entries of one block are one read.
			if n := len(line); n > 0 && line[n-1].snap == nil && line[n-1].at.path == at.path && line[n-1].at.block == at.block {
				line[n-1].ids = append(line[n-1].ids, cur)
			} else {
				line = append(line, ledgerPart{at: at, ids: []int64{cur}})
			}
		}
		parent, hasParent := at.ix.parentOf(at.entry)
		if !hasParent {
			break
		}
		cur = parent
	}
	return line, walked, true
}

// unreachedTips returns the snapshots of meta that no branch or tag
// reaches and that are no kept snapshot's parent: the heads of the lines
// rollbacks left, whose ledgers reach below what the table keeps.
func unreachedTips(meta table.Metadata) []int64 {
	reached := reachedByRefs(meta)
	parents := map[int64]bool{}
	for _, s := range meta.Snapshots() {
		if s.ParentSnapshotID != nil {
			parents[*s.ParentSnapshotID] = true
		}
	}
	var tips []int64
	for _, s := range meta.Snapshots() {
		if !reached[s.SnapshotID] && !parents[s.SnapshotID] {
			tips = append(tips, s.SnapshotID)
		}
	}
	return tips
}

// reachedByRefs returns the snapshots of meta that a branch or tag
// reaches through the parents it keeps.
func reachedByRefs(meta table.Metadata) map[int64]bool {
	reached := map[int64]bool{}
	for _, ref := range meta.Refs() {
		for s := meta.SnapshotByID(ref.SnapshotID); s != nil && !reached[s.SnapshotID]; {
			reached[s.SnapshotID] = true
			if s.ParentSnapshotID == nil {
				break
			}
			s = meta.SnapshotByID(*s.ParentSnapshotID)
		}
	}
	return reached
}

// stageSegment stages, on txn, the properties naming the segment seg and
// recording its digest, and the removal of those of the segments it
// absorbed.
func (t *Table) stageSegment(txn *table.Transaction, seg segment, absorbed []segment) error {
	if err := txn.SetProperties(iceberg.Properties{seg.key: seg.path, digestKey(seg.path): seg.digest.String()}); err != nil {
		return fmt.Errorf("stage the ledger archive segment of %s: %w", t.Name(), err)
	}
	var keys []string
	for _, a := range absorbed {
		keys = append(keys, a.key)
		if a.key != PropLedgerArchive && a.digest != (segmentDigest{}) {
			keys = append(keys, digestKey(a.path))
		}
	}
	// A floe before digests that absorbed a segment removed its name and
	// left its digest: removed with the next segment.
	for k := range t.tbl.Properties() {
		if id, ok := strings.CutPrefix(k, PropLedgerDigestPrefix); ok && !slices.Contains(keys, k) {
			if _, named := t.tbl.Properties()[PropLedgerSegmentPrefix+id]; !named {
				keys = append(keys, k)
			}
		}
	}
	if err := txn.RemoveProperties(keys); err != nil {
		return fmt.Errorf("stage the ledger archive segment of %s: %w", t.Name(), err)
	}
	return nil
}

// adoptSegment adopts the table a commit naming the segment seg, written
// to path, returned, and deletes the files of the segments seg absorbed:
// the table no longer names them, and seg holds their entries. A reader
// that loaded an earlier version naming them and reads one after it is
// gone reloads the table (adopt); a stray one left by a failed delete is
// collected later (staleArchives).
func (t *Table) adoptSegment(ctx context.Context, log *slog.Logger, tbl *table.Table, seg segment, absorbed []segment) error {
	// The segment just written need not be read back.
	prev := t.segments
	t.segments = append(slices.Clip(prev), seg)
	if err := t.adoptCommitted(ctx, tbl); err != nil {
		t.segments = prev
		return err
	}
	var paths []string
	for _, a := range absorbed {
		paths = append(paths, segmentFiles(a.path)...)
	}
	t.removePaths(ctx, log, paths...)
	return nil
}

// LostEntriesError reports ledger entries that no archive file of the
// table holds although their snapshots were expired (for example by
// another tool): the ledgers through them are truncated, and floe cannot
// repair them.
type LostEntriesError struct {
	Table     string
	Snapshots []int64
	// Refs are the branches and tags whose ledger is truncated, when
	// known.
	Refs []string
}

func (e *LostEntriesError) Error() string {
	through := "the ledgers through them are truncated"
	if len(e.Refs) > 0 {
		through = fmt.Sprintf("the ledgers of %s are truncated", strings.Join(e.Refs, ", "))
	}
	return fmt.Sprintf("table %s: the ledger entries of snapshots %v are gone: they were expired but no ledger archive file holds them (expired by another tool than floe maintain?), so %s and floe maintain cannot repair them; replay the topics into a new table, or drop the branches and tags that need them",
		e.Table, e.Snapshots, through)
}

// commitMergedArchive writes merged, a superset of every segment the
// table names, as a new segment and commits a table version naming it
// instead of them. A commit that lost a race to another commit changes
// nothing; the caller reloads and checks again. The files of the segments
// replaced stay: they may hold entries of snapshots that an overlapping
// run expired, and floe maintain --remove-orphans and sinks' AutoMaintain
// delete them once they are old and hold nothing the table lacks
// (staleArchives).
func (t *Table) commitMergedArchive(ctx context.Context, log *slog.Logger, merged *Archive) error {
	path, ix, digest, err := writeSegment(ctx, t.tbl, merged.Len(), merged.Snapshots, nil)
	if err != nil {
		t.removePaths(ctx, log, segmentFiles(path)...)
		return &ArchiveError{Table: t.Name(), Path: path, Err: fmt.Errorf("write the merged archive: %w", err)}
	}
	seg := segment{key: segmentKey(path), path: path, digest: digest, ix: ix}
	txn := t.tbl.NewTransaction()
	if err := t.stageSegment(txn, seg, t.segments); err != nil {
		t.removePaths(ctx, log, segmentFiles(path)...)
		return err
	}
	tbl, err := txn.Commit(ctx)
	if err != nil && isConflict(err) {
		t.removePaths(ctx, log, segmentFiles(path)...)
		return nil
	}
	if err != nil {
		return fmt.Errorf("commit the merged ledger archive of %s (outcome unknown): %w", t.Name(), err)
	}
	prev := t.segments
	t.segments = append(slices.Clip(prev), seg)
	if err := t.adoptCommitted(ctx, tbl); err != nil {
		t.segments = prev
		return err
	}
	return nil
}

// repairLedger repairs the ledger of every branch and tag that reads
// truncated (LedgerAt fails with a *TruncatedLedgerError) when the archive
// files still hold the missing entries. floe before archive segments named
// one archive file per table, and of two overlapping maintain runs the
// later commit replaced the other's archive; the run that noticed repaired
// it, and one killed before that left every reader of the table (sinks,
// audits, lookups) failing for good. Only a later run can repair such a
// table: it merges every archive file (mergeArchives) and commits the
// merge. When even the merge leaves a ledger
// truncated, the entries are gone (another tool expired the snapshots):
// that is a *LostEntriesError naming the snapshots, and nothing changes.
// A dry run reports what it would repair and commits nothing.
func (t *Table) repairLedger(ctx context.Context, log *slog.Logger, dryRun bool, res *MaintainResult) error {
	const maxRepairs = 5
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			if err := t.Refresh(ctx); err != nil {
				return fmt.Errorf("check the repaired ledger of %s: %w", t.Name(), err)
			}
		}
		meta := t.tbl.Metadata()
		refs, _ := truncations(meta, t.archive)
		if len(refs) == 0 {
			return nil
		}
		if attempt > maxRepairs {
			return fmt.Errorf("repair the ledger of %s: gave up after %d attempts, branches and tags %v still read truncated (is another floe maintain running?)",
				t.Name(), maxRepairs, refs)
		}
		merged, err := t.mergeArchives(ctx, log)
		if err != nil {
			return err
		}
		if still, missing := truncations(meta, merged); len(missing) > 0 {
			return &LostEntriesError{Table: t.Name(), Snapshots: missing, Refs: still}
		}
		res.TruncatedRefs, res.Restored = refs, res.Restored[:0]
		for _, s := range merged.Snapshots {
			if meta.SnapshotByID(s.SnapshotID) == nil && !t.archive.has(s.SnapshotID) {
				res.Restored = append(res.Restored, s.SnapshotID)
			}
		}
		if dryRun {
			return nil
		}
		log.Warn("the ledger archive lacks entries (a floe maintain run was interrupted before its repair); committing the merge of the archive files",
			"table", t.Name(), "refs", refs, "restored", len(res.Restored))
		if err := t.commitMergedArchive(ctx, log, merged); err != nil {
			return err
		}
	}
}

// truncations returns the branches and tags of meta whose ledger, with
// archive, is truncated, and the snapshots whose missing entries truncate
// them, each sorted.
func truncations(meta table.Metadata, archive archivedSnapshots) (refs []string, missing []int64) {
	for name, ref := range meta.Refs() {
		// Walked, not decoded: a sink's maintenance runs this every few
		// commits, and the history only grows.
		te := ancestryEnd(meta, archive, ref.SnapshotID)
		if te == nil {
			continue
		}
		refs = append(refs, name)
		// The oldest snapshot found is there, and its parent is not; when
		// the head itself is missing, Oldest is the head.
		id := te.Oldest
		s := meta.SnapshotByID(id)
		if s == nil {
			s = archive.snapshot(id)
		}
		if s != nil && s.ParentSnapshotID != nil {
			id = *s.ParentSnapshotID
		}
		if !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	slices.Sort(refs)
	slices.Sort(missing)
	return refs, missing
}

// mergeArchives returns the union of the loaded archive and every archive
// file of the table under its archive folder. A file that vanished (a
// concurrent run removed it) is skipped, and so, with a warning, is one
// that is not an archive of this table.
func (t *Table) mergeArchives(ctx context.Context, log *slog.Logger) (*Archive, error) {
	uuid := t.tbl.Metadata().TableUUID().String()
	var merged *Archive
	for _, seg := range t.segments {
		a, err := t.readSegment(ctx, seg)
		if err != nil {
			return nil, fmt.Errorf("merge the ledger archives of %s: %w", t.Name(), err)
		}
		merged = merged.union(uuid, a)
	}
	merged = merged.union(uuid, nil)
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("merge the ledger archives of %s: %w", t.Name(), err)
	}
	lfs, ok := fsys.(iceio.ListableIO)
	if !ok {
		return nil, fmt.Errorf("merge the ledger archives of %s: the table's storage cannot list files", t.Name())
	}
	dir := archiveLocation(t.tbl.Metadata())
	named := t.namedSegmentNames()
	err = lfs.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".json") {
			return nil
		}
		if named[path[strings.LastIndexByte(path, '/')+1:]] {
			return nil // read above, checked against its digest
		}
		a, err := readArchiveFile(fsys, uuid, t.Name(), path, "")
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			log.Warn("skipping a file that is not a ledger archive of this table", "table", t.Name(), "file", path, "err", err)
			return nil
		}
		merged = merged.union(uuid, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("merge the ledger archives of %s: list %s: %w", t.Name(), dir, err)
	}
	return merged, nil
}

// DataLocation is where the table's data files are written.
func (t *Table) DataLocation() string {
	if loc := t.tbl.Properties()[table.WriteDataPathKey]; loc != "" {
		return strings.TrimSuffix(loc, "/")
	}
	return strings.TrimSuffix(t.tbl.Location(), "/") + "/data"
}

// OrphanLocationError reports a data location that --remove-orphans must
// not scan: every unreferenced file under it would be deleted, and there
// that includes files that are not this table's data files.
type OrphanLocationError struct {
	Table        string
	DataLocation string
	// Reason says what else lives under DataLocation.
	Reason string
}

func (e *OrphanLocationError) Error() string {
	return fmt.Sprintf("table %s: refusing to remove orphans under its data location %s: %s; set %s to a folder of its own under the table location (the default is <location>/data), or remove orphans with a tool that scans only this table's data files",
		e.Table, e.DataLocation, e.Reason, table.WriteDataPathKey)
}

// metadataLocation is where the table's metadata files (and the ledger
// archive folder) are written.
func (t *Table) metadataLocation() string {
	if loc := t.tbl.Properties()[table.WriteMetadataPathKey]; loc != "" {
		return strings.TrimSuffix(loc, "/")
	}
	return strings.TrimSuffix(t.tbl.Location(), "/") + "/metadata"
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// checkOrphanLocation refuses a data location that is not a folder of this
// table's own: write.data.path may be the table location itself (then the
// metadata and the ledger archive, which no snapshot references, would be
// deleted) or a folder shared with other tables (then their files would).
func (t *Table) checkOrphanLocation() error {
	data, loc, meta := t.DataLocation(), strings.TrimSuffix(t.tbl.Location(), "/"), t.metadataLocation()
	fail := func(reason string) error {
		return &OrphanLocationError{Table: t.Name(), DataLocation: data, Reason: reason}
	}
	switch {
	case !strings.HasPrefix(data, loc+"/"):
		return fail(fmt.Sprintf("it is not a folder under the table location %s, so other tables' files may be there", loc))
	case within(meta, data):
		return fail(fmt.Sprintf("it holds the metadata location %s, whose files (the ledger archive among them) no snapshot references", meta))
	}
	return nil
}

// maxOrphanListings is how many times removeOrphans lists a data folder
// whose files other writers delete meanwhile.
const maxOrphanListings = 10

// removeOrphans deletes (or, in a dry run, lists) the data files under the
// data location that no snapshot references and that are older than
// minAge, so that no writer can still be about to commit them. Files under
// the metadata location or in a ledger archive folder are never deleted,
// whatever the data location: the archive is referenced by a property, not
// a snapshot. A table whose data folder does not exist (only file-less
// commits so far) has no orphans.
func (t *Table) removeOrphans(ctx context.Context, log *slog.Logger, minAge time.Duration, dryRun bool, res *MaintainResult) error {
	// The files referenced are those of the version loaded now, just
	// before the listing: a file older than minAge that a commit after
	// it names was written more than minAge before its commit, which
	// minAge rules out. The version the run loaded at its start is not:
	// a run that took longer than minAge to get here (a large table's
	// manifests, its dead-letter tables) deleted the files of commits
	// that landed meanwhile.
	if err := t.Refresh(ctx); err != nil {
		return fmt.Errorf("remove orphan files of %s: %w", t.Name(), err)
	}
	plan, err := t.tbl.PlanOrphanFiles(ctx, table.WithLocation(t.DataLocation()), table.WithFilesOlderThan(minAge))
	// A file another writer's expiry or compaction deletes while the
	// folder is listed fails the listing (iceberg-go's stats each file it
	// lists): list again. Three listings were too few beside three sinks
	// compacting every few seconds (the fault campaign, in CI).
	for attempt := 1; attempt < maxOrphanListings && errors.Is(err, fs.ErrNotExist); attempt++ {
		// As loaded just before this listing too: files of commits during
		// the first one may be older than minAge now.
		if err := t.Refresh(ctx); err != nil {
			return fmt.Errorf("remove orphan files of %s: %w", t.Name(), err)
		}
		plan, err = t.tbl.PlanOrphanFiles(ctx, table.WithLocation(t.DataLocation()), table.WithFilesOlderThan(minAge))
	}
	if err != nil {
		if ok, serr := t.folderExists(ctx, t.DataLocation()); serr == nil && !ok {
			return nil
		}
		return fmt.Errorf("remove orphan files of %s: %w", t.Name(), err)
	}
	meta := t.metadataLocation()
	keep, err := t.keptFiles(ctx)
	if err != nil {
		return err
	}
	var orphans []table.OrphanFile
	for _, f := range plan.OrphanFiles() {
		if within(f.Path, meta) || strings.Contains(f.Path, "/"+archiveFolder+"/") {
			log.Warn("not deleting an unreferenced file in a metadata or ledger archive folder", "table", t.Name(), "file", f.Path)
			continue
		}
		if keep.has(f.Path) {
			continue // dead letters a data-table snapshot names (keptFiles)
		}
		orphans = append(orphans, f)
	}
	slices.SortFunc(orphans, func(x, y table.OrphanFile) int { return strings.Compare(x.Path, y.Path) })
	if dryRun {
		for _, f := range orphans {
			res.Orphans = append(res.Orphans, f.Path)
			res.OrphanBytes += f.SizeBytes
		}
		return nil
	}
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return fmt.Errorf("remove orphan files of %s: %w", t.Name(), err)
	}
	var errs []error
	for _, f := range orphans {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := fsys.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		res.Orphans = append(res.Orphans, f.Path)
		res.OrphanBytes += f.SizeBytes
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove orphan files of %s (%d deleted): %w", t.Name(), len(res.Orphans), err)
	}
	return nil
}

// folderExists reports whether dir exists on the table's storage, walking
// no further than dir itself.
func (t *Table) folderExists(ctx context.Context, dir string) (bool, error) {
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return false, err
	}
	lfs, ok := fsys.(iceio.ListableIO)
	if !ok {
		return false, errors.New("the table's storage cannot list files")
	}
	found := false
	err = lfs.WalkDir(dir, func(_ string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		found = true
		return fs.SkipAll
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return found, err
}

// removePaths deletes files floe wrote but no metadata references; failures
// are logged (they leave a stray file, never a wrong ledger).
func (t *Table) removePaths(ctx context.Context, log *slog.Logger, paths ...string) {
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		log.Warn("cannot open table storage to remove a file", "table", t.Name(), "err", err)
		return
	}
	for _, p := range paths {
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("cannot remove file", "table", t.Name(), "file", p, "err", err)
		}
	}
}
