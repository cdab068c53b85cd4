package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

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
	// that no snapshot references and that are older than OrphanMinAge
	// (zero: DefaultOrphanMinAge).
	RemoveOrphans bool
	OrphanMinAge  time.Duration
	// DryRun reports what would be done and changes nothing.
	DryRun bool
	// Logger receives retries and cleanup failures; nil: slog.Default().
	Logger *slog.Logger
}

// MaintainResult reports what Maintain did (or, in a dry run, would do).
type MaintainResult struct {
	// Expired are the ids of the expired snapshots, oldest first;
	// ExpiredCommits how many of them were floe commits.
	Expired        []int64
	ExpiredCommits int
	// Archive is the ledger archive the table names afterwards ("": none)
	// and Archived the number of snapshots it holds; a dry run leaves both
	// as they were.
	Archive  string
	Archived int
	// Orphans are the unreferenced data files deleted, OrphanBytes their
	// size.
	Orphans     []string
	OrphanBytes int64
}

// GCDisabledError reports a table with gc.enabled=false: its files may be
// shared with other tables, so Maintain neither expires its snapshots (which
// deletes the files only they reference) nor deletes orphans.
type GCDisabledError struct{ Table string }

func (e *GCDisabledError) Error() string {
	return fmt.Sprintf("table %s has %s=false (its files may be shared with other tables): floe maintain does not expire or delete its files; set %s=true if the table owns its files",
		e.Table, table.GCEnabledKey, table.GCEnabledKey)
}

// Maintain expires snapshots and deletes orphan data files without losing
// the ledger: the ledger entries of the snapshots an expiry removes are
// written to a new ledger archive first, and the same catalog commit that
// removes the snapshots points the table at that archive
// (PropLedgerArchive). When the archive cannot be written, nothing is
// expired. A concurrent commit (a sink) makes the expiry commit fail its
// branch assertions; Maintain then reloads and computes the expiry again.
func (t *Table) Maintain(ctx context.Context, opts MaintainOptions) (MaintainResult, error) {
	var res MaintainResult
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := t.Refresh(ctx); err != nil {
		return res, err
	}
	if v, ok := t.tbl.Properties()[table.GCEnabledKey]; ok && strings.EqualFold(v, "false") {
		return res, &GCDisabledError{Table: t.Name()}
	}
	if opts.Expire {
		if err := t.expire(ctx, log, opts, &res); err != nil {
			return res, err
		}
	}
	res.Archive = t.tbl.Properties()[PropLedgerArchive]
	res.Archived = t.archive.Len()
	if opts.RemoveOrphans {
		if err := t.removeOrphans(ctx, opts, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// expire runs the archive-then-expire commit, retrying lost races.
func (t *Table) expire(ctx context.Context, log *slog.Logger, opts MaintainOptions, res *MaintainResult) error {
	expOpts := []table.ExpireSnapshotsOpt{table.WithOlderThan(opts.ExpireOlderThan), table.WithRetainLast(max(opts.RetainLast, 1))}
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
		txn := t.tbl.NewTransaction()
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
		archive := t.archive.with(t.tbl.Metadata().TableUUID().String(), expired)
		if opts.DryRun {
			return nil
		}
		prev := t.tbl.Properties()[PropLedgerArchive]
		path, err := writeArchive(ctx, t.tbl, archive)
		if err != nil {
			return &ArchiveError{Table: t.Name(), Path: path, Err: fmt.Errorf("write: %w (nothing was expired)", err)}
		}
		if err := txn.SetProperties(iceberg.Properties{PropLedgerArchive: path}); err != nil {
			t.removePaths(ctx, log, path)
			return fmt.Errorf("stage the ledger archive of %s: %w", t.Name(), err)
		}
		tbl, err := txn.Commit(ctx)
		if err != nil && tbl != nil {
			// The catalog accepted the commit; only deleting the files the
			// expired snapshots alone referenced failed. Data files left
			// behind are orphans that --remove-orphans deletes.
			log.Warn("snapshots expired, but deleting their files failed", "table", t.Name(), "err", err)
			err = nil
		}
		if err != nil && isConflict(err) {
			// Nothing was committed: the new archive is unreferenced.
			t.removePaths(ctx, log, path)
			lastErr = err
			log.Info("expiry commit lost a race, reloading", "table", t.Name(), "attempt", attempt, "err", err)
			continue
		}
		if err != nil {
			// The outcome is unknown: the archive may be referenced now,
			// so it stays.
			return fmt.Errorf("commit snapshot expiry of %s (outcome unknown; run floe maintain again): %w", t.Name(), err)
		}
		// The archive just written is the one tbl names: adopt need not
		// read it back.
		t.archive, t.archivePath = archive, path
		if err := t.adopt(ctx, tbl); err != nil {
			return err
		}
		if prev != "" {
			// Superseded: the new archive holds every entry of the old one.
			t.removePaths(ctx, log, prev)
		}
		return nil
	}
	return fmt.Errorf("expire snapshots of %s: gave up after %d attempts: %w", t.Name(), maxAttempts, lastErr)
}

// DataLocation is where the table's data files are written.
func (t *Table) DataLocation() string {
	if loc := t.tbl.Properties()[table.WriteDataPathKey]; loc != "" {
		return strings.TrimSuffix(loc, "/")
	}
	return strings.TrimSuffix(t.tbl.Location(), "/") + "/data"
}

// removeOrphans deletes (or, in a dry run, lists) the data files under the
// data location that no snapshot references and that are old enough that
// no writer can still be about to commit them.
func (t *Table) removeOrphans(ctx context.Context, opts MaintainOptions, res *MaintainResult) error {
	age := opts.OrphanMinAge
	if age <= 0 {
		age = DefaultOrphanMinAge
	}
	r, err := t.tbl.DeleteOrphanFiles(ctx,
		table.WithLocation(t.DataLocation()),
		table.WithFilesOlderThan(age),
		table.WithDryRun(opts.DryRun))
	if err != nil {
		return fmt.Errorf("remove orphan files of %s: %w", t.Name(), err)
	}
	res.Orphans = slices.Sorted(slices.Values(r.OrphanFileLocations))
	res.OrphanBytes = r.TotalSizeBytes
	return nil
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
