package snapshot_test

import (
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/snapshot"
)

// dataFilesOnDisk lists the files under the table's data folder.
func dataFilesOnDisk(t *testing.T, tbl *snapshot.Table) []string {
	t.Helper()
	var out []string
	dir := strings.TrimPrefix(tbl.DataLocation(), "file://")
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hookLocker is a sync.Locker that runs first (once) when it is first
// locked: a compaction takes its Turn before each commit attempt, after
// rewriting its files.
type hookLocker struct {
	sync.Mutex
	first func()
}

func (l *hookLocker) Lock() {
	l.Mutex.Lock()
	if f := l.first; f != nil {
		l.first = nil
		f()
	}
}

// TestReviewS63CompactOutlivingOrphanAge: a compaction of a large table
// (or a sink's scheduled one, --compact-interval) writes its merged files
// first and commits them once every group is rewritten, which on a large
// table can take longer than --orphan-min-age (1h by default): nothing
// bounded a compaction's duration. A floe maintain --remove-orphans run
// meanwhile (a cron job) finds the merged files unreferenced and older
// than the age, and deletes them, before the compaction's commit attempt
// or while it is under way; the compaction then committed a snapshot
// naming files that are gone: the head cannot be read, and the rows of the
// files it replaced are lost for good once the snapshots before it expire.
// backdate stands for the hour the rewrite took.
func TestReviewS63CompactOutlivingOrphanAge(t *testing.T) {
	for _, during := range []bool{false, true} {
		t.Run(map[bool]string{false: "cleanup-before-commit", true: "cleanup-during-commit"}[during], func(t *testing.T) {
			cat := tempCatalog(t)
			tbl := openTestTable(t, cat, "lake.longcompact", snapshot.OpenOptions{Create: true})
			smallFiles(t, tbl, 0, 4, 5)
			rows := snapshotRows(t, tbl, 0)
			hc := &hookCatalog{Catalog: cat}
			comp := openTestTable(t, hc, "lake.longcompact", snapshot.OpenOptions{})
			var orphans []string
			cleanup := func() {
				maint := openTestTable(t, cat, "lake.longcompact", snapshot.OpenOptions{})
				res, err := maint.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Error(err)
				}
				orphans = res.Orphans
			}
			turn := &hookLocker{first: func() {
				// The rewrite took more than an hour: every file it
				// wrote is older than the default orphan age.
				backdate(t, dataFilesOnDisk(t, tbl)...)
				if !during {
					cleanup()
				}
			}}
			if during {
				hc.beforeCommit = cleanup
			}
			res, cerr := comp.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Turn: turn, Logger: slog.New(slog.DiscardHandler)})
			t.Logf("compaction: snapshot %d, %d attempts, err %v; orphans deleted meanwhile: %v", res.SnapshotID, res.Attempts, cerr, orphans)
			if err := tbl.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Whatever the compaction did, the head must read the same rows.
			if err := snapshotRowsOrErr(tbl); err != nil {
				t.Fatalf("the head cannot be read after the compaction (orphans deleted meanwhile %v): %v", orphans, err)
			}
			if got := snapshotRows(t, tbl, 0); !slices.Equal(got, rows) {
				t.Fatalf("head holds %d rows, want %d", len(got), len(rows))
			}
			rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Findings) != 0 {
				t.Errorf("audit findings %v", rep.Findings)
			}
		})
	}
}
