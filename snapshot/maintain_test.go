package snapshot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// maintainTable opens a new table of a SQLite catalog and file warehouse
// in a temporary folder and commits n ranges to it, one per snapshot.
func maintainTable(t *testing.T, n int) (*snapshot.Table, string) {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := snapshot.Open(t.Context(), cat, []string{"lake", "maint"}, snapshot.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	commitRanges(t, tbl, 0, n)
	return tbl, dir
}

// commitRanges commits ranges [10i, 10i+10) of partition 0, for i in
// [from, to), one per snapshot.
func commitRanges(t *testing.T, tbl *snapshot.Table, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: 0}, Interval: mapping.Interval{Low: int64(10 * i), High: int64(10*i + 10)}}
		if _, err := tbl.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{r}}, snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
}

func ledger(t *testing.T, tbl *snapshot.Table) mapping.Ledger {
	t.Helper()
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestMaintainKeepsLedger: after expiry the ledger is the same, also for a
// table opened afresh, and commits after the expiry extend it; a second
// expiry carries the first one's archived entries over.
func TestMaintainKeepsLedger(t *testing.T) {
	tbl, _ := maintainTable(t, 5)
	before := ledger(t, tbl)
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) != 4 || res.ExpiredCommits != 4 || res.Archived != 4 || len(res.Segments) != 1 {
		t.Fatalf("result %+v, want 4 expired and archived commits", res)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots left, want 1", n)
	}
	fresh, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after := ledger(t, fresh); !reflect.DeepEqual(before, after) {
		t.Fatalf("ledger after expiry\n%+v\nwant\n%+v", after, before)
	}
	first := res.Segments[0]
	commitRanges(t, fresh, 5, 8)
	res, err = fresh.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2})
	if err != nil {
		t.Fatal(err)
	}
	// 2 new entries are at least a quarter of the first segment's 4: the
	// new segment absorbs it.
	if len(res.Expired) != 2 || res.Archived != 6 || len(res.Segments) != 1 || res.Segments[0] == first {
		t.Fatalf("second expiry %+v, want 2 more expired, 6 archived in one new segment", res)
	}
	if _, err := os.Stat(strings.TrimPrefix(first, "file://")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("absorbed segment %s: stat err %v, want it removed", first, err)
	}
	l := ledger(t, fresh)
	if len(l.Commits) != 8 || !reflect.DeepEqual(l.Commits[:5], before.Commits) {
		t.Fatalf("ledger after the second expiry: %d commits, first five differ: %+v", len(l.Commits), l.Commits)
	}
	if next := l.Next()[mapping.TopicPartition{Topic: "t", Partition: 0}]; next != 80 {
		t.Fatalf("next %d, want 80", next)
	}
}

// TestMaintainDryRunChangesNothing: a dry run reports the snapshots it would
// expire and keeps them.
func TestMaintainDryRunChangesNothing(t *testing.T) {
	tbl, _ := maintainTable(t, 3)
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) != 2 || len(res.Segments) != 0 {
		t.Fatalf("dry run %+v, want 2 snapshots to expire and no archive", res)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n != 3 {
		t.Fatalf("%d snapshots after a dry run, want 3", n)
	}
}

// TestMaintainArchiveFailureExpiresNothing: when the archive cannot be
// written (here a file stands where its folder must go), no snapshot is
// expired.
func TestMaintainArchiveFailureExpiresNothing(t *testing.T) {
	tbl, _ := maintainTable(t, 3)
	meta := strings.TrimPrefix(tbl.Iceberg().Location(), "file://") + "/metadata"
	if err := os.WriteFile(filepath.Join(meta, "floe-ledger"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1})
	var ae *snapshot.ArchiveError
	if !errors.As(err, &ae) {
		t.Fatalf("err %v, want an *ArchiveError", err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n != 3 {
		t.Fatalf("%d snapshots after a failed archive write, want all 3", n)
	}
	if l := ledger(t, tbl); len(l.Commits) != 3 {
		t.Fatalf("ledger has %d commits, want 3", len(l.Commits))
	}
}

// TestLedgerTruncatedBeyondArchive: snapshots expired by another tool after
// floe maintain are not in the archive, so the ledger is still refused.
func TestLedgerTruncatedBeyondArchive(t *testing.T) {
	tbl, _ := maintainTable(t, 3)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	commitRanges(t, tbl, 3, 4)
	expireAllButLast(t, tbl, tbl)
	if _, err := tbl.Ledger(); !errors.Is(err, snapshot.ErrTruncatedLedger) {
		t.Fatalf("err %v, want ErrTruncatedLedger", err)
	}
}

// TestMaintainRemovesOldOrphansOnly: an unreferenced data file older than
// the safety age (a crashed writer's) is deleted; a young one (a writer may
// be about to commit it) is kept.
func TestMaintainRemovesOldOrphansOnly(t *testing.T) {
	tbl, _ := maintainTable(t, 1)
	data := strings.TrimPrefix(tbl.DataLocation(), "file://")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	old, young := filepath.Join(data, "crashed.parquet"), filepath.Join(data, "inflight.parquet")
	for _, f := range []string{old, young} {
		if err := os.WriteFile(f, []byte("PAR1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orphans) != 1 || !strings.HasSuffix(res.Orphans[0], "crashed.parquet") {
		t.Fatalf("dry run orphans %v, want only crashed.parquet", res.Orphans)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("dry run deleted %s: %v", old, err)
	}
	if res, err = tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true}); err != nil {
		t.Fatal(err)
	}
	if len(res.Orphans) != 1 {
		t.Fatalf("orphans %v, want one", res.Orphans)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old orphan: stat err %v, want it deleted", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatalf("young unreferenced file deleted: %v", err)
	}
}

// TestLedgerAfterConcurrentMaintain: a writer that loaded the table before
// another process expired its history commits on top of the expiry; its
// next reload must read the new archive, though its own commit already
// brought the metadata naming it.
func TestLedgerAfterConcurrentMaintain(t *testing.T) {
	a, _ := maintainTable(t, 3)
	b, err := snapshot.Open(t.Context(), a.Catalog(), a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	commitRanges(t, b, 3, 4)
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := ledger(t, b)
	if len(l.Commits) != 4 || l.Next()[mapping.TopicPartition{Topic: "t", Partition: 0}] != 40 {
		t.Fatalf("ledger %+v, want 4 commits up to 40", l)
	}
}

// TestMaintainRacesWriter: expiries running while another handle commits
// lose races to its commits (their branch assertions fail) and retry; the
// writer's retries read the archive the expiries wrote. In the end every
// commit is in the ledger, in order, and the history is expired.
func TestMaintainRacesWriter(t *testing.T) {
	a, _ := maintainTable(t, 1)
	w, err := snapshot.Open(t.Context(), a.Catalog(), a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const commits = 30
	quiet := slog.New(slog.DiscardHandler)
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= commits; i++ {
			r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: 0}, Interval: mapping.Interval{Low: int64(10 * i), High: int64(10*i + 10)}}
			if _, err := w.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{r}}, snapshot.CommitOptions{Writer: "w", Logger: quiet}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	runs := 0
	for finished := false; !finished; runs++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			finished = true
		default:
		}
		if _, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}); err != nil {
			t.Fatalf("maintain run %d: %v", runs, err)
		}
	}
	fresh, err := snapshot.Open(t.Context(), a.Catalog(), a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := ledger(t, fresh)
	if len(l.Commits) != commits+1 {
		t.Fatalf("%d commits in the ledger, want %d", len(l.Commits), commits+1)
	}
	for i, c := range l.Commits {
		if r := c.Ranges[0]; r.Low != int64(10*i) {
			t.Fatalf("commit %d covers %s, want it to start at %d", i, r.Interval, 10*i)
		}
	}
	if n := len(fresh.Iceberg().Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots after the last expiry, want 1", n)
	}
	t.Logf("%d maintain runs during %d commits", runs, commits)
}

// TestMaintainRefusesGCDisabled: a table whose files may be shared
// (gc.enabled=false) is neither expired nor cleaned.
func TestMaintainRefusesGCDisabled(t *testing.T) {
	tbl, _ := maintainTable(t, 2)
	txn := tbl.Iceberg().NewTransaction()
	if err := txn.SetProperties(map[string]string{table.GCEnabledKey: "false"}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, RemoveOrphans: true})
	var ge *snapshot.GCDisabledError
	if !errors.As(err, &ge) {
		t.Fatalf("err %v, want a *GCDisabledError", err)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n != 2 {
		t.Fatalf("%d snapshots, want 2", n)
	}
}

// TestWriterCommitsTwiceAfterConcurrentMaintain: a running sink's handle,
// opened before another process expired its history, commits on top of
// the expiry and then commits again without a reload in between. The
// first commit brings metadata naming the new archive, so the second
// commit's ledger check must read that archive, not the one loaded at
// Open.
func TestWriterCommitsTwiceAfterConcurrentMaintain(t *testing.T) {
	a, _ := maintainTable(t, 3)
	b, err := snapshot.Open(t.Context(), a.Catalog(), a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	commitRanges(t, b, 3, 5)
	l := ledger(t, b)
	if len(l.Commits) != 5 || l.Next()[mapping.TopicPartition{Topic: "t", Partition: 0}] != 50 {
		t.Fatalf("ledger %+v, want 5 commits up to 50", l)
	}
}

// staleCatalog answers the first LoadTable with stale metadata, as a
// reader sees it when a maintain run commits between its loading the
// metadata and its reading the archive the metadata names.
type staleCatalog struct {
	icecat.Catalog
	stale *table.Table
}

func (c *staleCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if s := c.stale; s != nil {
		c.stale = nil
		return s, nil
	}
	return c.Catalog.LoadTable(ctx, ident)
}

// TestOpenAfterArchiveSuperseded: a reader whose metadata names an archive
// that a later maintain run superseded and deleted reloads the table and
// reads the new archive, instead of failing.
func TestOpenAfterArchiveSuperseded(t *testing.T) {
	a, _ := maintainTable(t, 3)
	if _, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	stale := a.Iceberg()
	commitRanges(t, a, 3, 4)
	res, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	old := stale.Properties()
	for k, v := range old {
		if !strings.HasPrefix(k, snapshot.PropLedgerSegmentPrefix) {
			continue
		}
		if _, err := os.Stat(strings.TrimPrefix(v, "file://")); slices.Contains(res.Segments, v) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("segment %s: stat err %v, want it absorbed by %v and removed", v, err, res.Segments)
		}
	}
	r, err := snapshot.Open(t.Context(), &staleCatalog{Catalog: a.Catalog(), stale: stale}, a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := ledger(t, r); len(l.Commits) != 4 {
		t.Fatalf("ledger has %d commits, want 4", len(l.Commits))
	}
}

// hookCatalog runs beforeCommit (once) when a table loaded through it
// commits, before the commit reaches the catalog: the commit was planned on
// metadata that beforeCommit makes stale, and beforeLoad (once) when it
// loads a table, before the load reaches the catalog: what another writer
// does meanwhile. It also plays a process killed
// around a commit: with failCommits no commit reaches the catalog (killed
// before it answered), with dieAfterCommit the next commit lands and every
// later load fails (killed right after it).
type hookCatalog struct {
	icecat.Catalog
	beforeCommit   func()
	beforeLoad     func()
	failCommits    bool
	dieAfterCommit bool
	dead           bool
	// loseReply makes the next commit land and then answer an error (the
	// reply lost: an unknown outcome), after running afterLanding, what
	// other writers do meanwhile.
	loseReply    bool
	afterLanding func()
}

// errKilled is what a hookCatalog answers once its process is "dead".
var errKilled = errors.New("killed")

func (c *hookCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if f := c.beforeLoad; f != nil {
		c.beforeLoad = nil
		f()
	}
	if c.dead {
		return nil, errKilled
	}
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c *hookCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if f := c.beforeCommit; f != nil {
		c.beforeCommit = nil
		f()
	}
	if c.failCommits || c.dead {
		return nil, "", errKilled
	}
	meta, loc, err := c.Catalog.CommitTable(ctx, ident, reqs, updates)
	if err == nil && c.dieAfterCommit {
		c.dead = true
	}
	if err == nil && c.loseReply {
		c.loseReply = false
		if f := c.afterLanding; f != nil {
			f()
		}
		return nil, "", errors.New("read tcp 127.0.0.1:5432: connection reset by peer")
	}
	return meta, loc, err
}

// TestOverlappingMaintainRuns: two maintain runs plan their expiries on the
// same metadata; one expiring much commits first, then the other, expiring
// less (iceberg-go's expiry asserts no branch head that either moves).
// Each names a segment of its own, so the second does not replace the
// first one's entries: the table ends with a complete ledger.
func TestOverlappingMaintainRuns(t *testing.T) {
	a, _ := maintainTable(t, 3)
	if _, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	commitRanges(t, a, 3, 8)
	want := ledger(t, a)
	quiet := slog.New(slog.DiscardHandler)
	hc := &hookCatalog{Catalog: a.Catalog()}
	b, err := snapshot.Open(t.Context(), hc, a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc.beforeCommit = func() {
		if _, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}); err != nil {
			t.Errorf("first maintain run: %v", err)
		}
	}
	if _, err := b.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 4, Logger: quiet}); err != nil {
		t.Fatalf("second maintain run: %v", err)
	}
	fresh, err := snapshot.Open(t.Context(), a.Catalog(), a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ledger(t, fresh); !reflect.DeepEqual(got, want) {
		t.Fatalf("ledger after overlapping runs\n%+v\nwant\n%+v", got, want)
	}
	if n := len(fresh.Iceberg().Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots, want 1", n)
	}
}

// TestRemoveOrphansRefusesUnsafeDataLocation: a data location that is the
// table location (it holds the metadata and the ledger archive, which no
// snapshot references) or lies outside it (other tables' files may be
// there) is refused before anything changes.
func TestRemoveOrphansRefusesUnsafeDataLocation(t *testing.T) {
	for name, dataPath := range map[string]func(loc string) string{
		"table location": func(loc string) string { return loc },
		"shared folder":  func(loc string) string { return strings.TrimSuffix(loc, "/maint") + "/shared-data" },
	} {
		t.Run(name, func(t *testing.T) {
			tbl, _ := maintainTable(t, 3)
			if err := tbl.SetProperties(t.Context(), map[string]string{table.WriteDataPathKey: dataPath(tbl.Iceberg().Location())}); err != nil {
				t.Fatal(err)
			}
			_, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, RemoveOrphans: true, OrphanMinAge: time.Nanosecond})
			var le *snapshot.OrphanLocationError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), table.WriteDataPathKey) {
				t.Fatalf("err %v, want an *OrphanLocationError naming %s", err, table.WriteDataPathKey)
			}
			if n := len(tbl.Iceberg().Metadata().Snapshots()); n != 3 {
				t.Fatalf("%d snapshots after a refused run, want 3", n)
			}
		})
	}
}

// TestRemoveOrphansKeepsArchiveFolders: an unreferenced file in a ledger
// archive folder is never deleted as an orphan, even under the data
// location.
func TestRemoveOrphansKeepsArchiveFolders(t *testing.T) {
	tbl, _ := maintainTable(t, 1)
	data := strings.TrimPrefix(tbl.DataLocation(), "file://")
	if err := os.MkdirAll(filepath.Join(data, "floe-ledger"), 0o755); err != nil {
		t.Fatal(err)
	}
	orphan, archive := filepath.Join(data, "crashed.parquet"), filepath.Join(data, "floe-ledger", "00001-old.json")
	past := time.Now().Add(-2 * time.Hour)
	for _, f := range []string{orphan, archive} {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, past, past); err != nil {
			t.Fatal(err)
		}
	}
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orphans) != 1 || !strings.HasSuffix(res.Orphans[0], "crashed.parquet") {
		t.Fatalf("orphans %v, want only crashed.parquet", res.Orphans)
	}
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("file in a ledger archive folder deleted: %v", err)
	}
}

// TestOverlappingRunKilledAfterCommit: of two overlapping maintain runs,
// the one that commits last is killed right after its commit. With one
// archive file per table (floe before segments), that commit replaced
// the other run's archive and the ledger read truncated until a later run
// repaired it; with segments each run adds its own, so the ledger is
// whole for every reader at once, and a later run has nothing to repair.
func TestOverlappingRunKilledAfterCommit(t *testing.T) {
	a, _ := maintainTable(t, 3)
	if _, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	commitRanges(t, a, 3, 8)
	want := ledger(t, a)
	quiet := slog.New(slog.DiscardHandler)
	hc := &hookCatalog{Catalog: a.Catalog(), dieAfterCommit: true}
	b, err := snapshot.Open(t.Context(), hc, a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc.beforeCommit = func() {
		if _, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}); err != nil {
			t.Errorf("first maintain run: %v", err)
		}
	}
	// Nothing is left to do after the commit: the run may not notice its
	// death.
	if _, err := b.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 4, Logger: quiet}); err != nil && !errors.Is(err, errKilled) {
		t.Fatalf("second maintain run: %v", err)
	}
	if !hc.dead {
		t.Fatal("the second run's commit did not land")
	}
	if got := freshLedger(t, a); !reflect.DeepEqual(got, want) {
		t.Fatalf("ledger after the killed run\n%+v\nwant\n%+v", got, want)
	}
	res, err := a.Maintain(t.Context(), snapshot.MaintainOptions{Logger: quiet})
	if err != nil || res.TruncatedRefs != nil {
		t.Fatalf("run after the killed one: %+v, %v; want nothing to repair", res, err)
	}
}

// TestMaintainRepairsLegacyTruncation: floe before segments named one
// archive file, and a run killed after replacing an overlapping run's
// archive left the ledger truncated (simulated: the table names an archive
// without some entries, the complete file stays on disk). Any later
// maintain run, even one with nothing to do, merges the archive files into
// a segment and makes it whole again.
func TestMaintainRepairsLegacyTruncation(t *testing.T) {
	tbl, _ := maintainTable(t, 6)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	want := ledger(t, freshTable(t, tbl))
	files := namedArchives(tbl)
	if len(files) != 1 {
		t.Fatalf("archive files %v, want one segment", files)
	}
	a := readArchiveFile(t, files[0])
	lost := []int64{a.Snapshots[len(a.Snapshots)-1].SnapshotID}
	a.Snapshots = a.Snapshots[:len(a.Snapshots)-1]
	b, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(metadataDir(tbl), "floe-ledger", "00001-partial.json")
	if err := os.WriteFile(partial, b, 0o644); err != nil {
		t.Fatal(err)
	}
	nameOnly(t, tbl, "file://"+partial)
	var te *snapshot.TruncatedLedgerError
	if _, err := freshTable(t, tbl).Ledger(); !errors.As(err, &te) {
		t.Fatalf("ledger of the legacy table: err %v, want a *TruncatedLedgerError", err)
	}
	quiet := slog.New(slog.DiscardHandler)
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{DryRun: true, Logger: quiet})
	if err != nil || !slices.Equal(res.TruncatedRefs, []string{"main"}) || !slices.Equal(sorted(res.Restored), lost) {
		t.Fatalf("dry run: %+v, %v; want main truncated and snapshots %v to restore", res, err, lost)
	}
	if _, err := freshTable(t, tbl).Ledger(); !errors.As(err, &te) {
		t.Fatalf("ledger after a dry run: err %v, want it still truncated", err)
	}
	if res, err = tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: quiet}); err != nil {
		t.Fatalf("maintain run with nothing to expire: %v", err)
	}
	if !slices.Equal(res.TruncatedRefs, []string{"main"}) || !slices.Equal(sorted(res.Restored), lost) || len(res.Segments) != 1 {
		t.Fatalf("repair %+v, want main repaired into one segment, snapshots %v restored", res, lost)
	}
	if _, legacy := tbl.Iceberg().Properties()[snapshot.PropLedgerArchive]; legacy {
		t.Fatalf("the repair kept the legacy archive property: %v", namedArchives(tbl))
	}
	if got := ledger(t, freshTable(t, tbl)); !reflect.DeepEqual(got, want) {
		t.Fatalf("ledger after the repair\n%+v\nwant\n%+v", got, want)
	}
	if res, err = tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: quiet}); err != nil || res.TruncatedRefs != nil {
		t.Fatalf("second run after the repair: %+v, %v; want nothing to repair", res, err)
	}
}

// TestMaintainRepairsTruncatedBranch: a branch other than main whose
// archived entries the named archive lost (simulated: an archive without
// them is committed directly, the complete one stays on disk) is repaired
// by a maintain run that only removes orphans, and main is not reported.
func TestMaintainRepairsTruncatedBranch(t *testing.T) {
	tbl, _ := maintainTable(t, 2)
	if err := tbl.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatal(err)
	}
	br, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{Branch: "rebuild"})
	if err != nil {
		t.Fatal(err)
	}
	commitRanges(t, br, 0, 4)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	wantMain, wantBranch := ledger(t, freshTable(t, tbl)), ledger(t, freshTable(t, br))

	// An archive holding main's archived entries only.
	mainIDs := map[int64]bool{}
	for _, c := range wantMain.Commits {
		mainIDs[c.SnapshotID] = true
	}
	files := namedArchives(tbl)
	if len(files) != 1 {
		t.Fatalf("archive files %v, want one segment", files)
	}
	a := readArchiveFile(t, files[0])
	var branchOnly []int64
	a.Snapshots = slices.DeleteFunc(a.Snapshots, func(s snapshot.ArchivedSnapshot) bool {
		if !mainIDs[s.SnapshotID] {
			branchOnly = append(branchOnly, s.SnapshotID)
		}
		return !mainIDs[s.SnapshotID]
	})
	b, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(metadataDir(tbl), "floe-ledger", "00001-partial.json")
	if err := os.WriteFile(partial, b, 0o644); err != nil {
		t.Fatal(err)
	}
	nameOnly(t, tbl, "file://"+partial)
	if _, err := freshTable(t, br).Ledger(); !errors.Is(err, snapshot.ErrTruncatedLedger) {
		t.Fatalf("branch ledger: err %v, want it truncated", err)
	}

	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true})
	if err != nil || !slices.Equal(res.TruncatedRefs, []string{"rebuild"}) || !slices.Equal(sorted(res.Restored), sorted(branchOnly)) {
		t.Fatalf("repair %+v, %v; want branch rebuild repaired, snapshots %v restored", res, err, branchOnly)
	}
	if got := ledger(t, freshTable(t, br)); !reflect.DeepEqual(got, wantBranch) {
		t.Fatalf("branch ledger after the repair\n%+v\nwant\n%+v", got, wantBranch)
	}
	if got := ledger(t, freshTable(t, tbl)); !reflect.DeepEqual(got, wantMain) {
		t.Fatalf("main ledger after the repair\n%+v\nwant\n%+v", got, wantMain)
	}
}

// freshTable opens tbl's table and branch afresh.
func freshTable(t *testing.T, tbl *snapshot.Table) *snapshot.Table {
	t.Helper()
	fresh, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{Branch: tbl.Branch()})
	if err != nil {
		t.Fatal(err)
	}
	return fresh
}

// archived returns the snapshots of the archive files the table names.
func archived(t *testing.T, tbl *snapshot.Table) []snapshot.ArchivedSnapshot {
	t.Helper()
	var snaps []snapshot.ArchivedSnapshot
	for _, f := range namedArchives(tbl) {
		snaps = append(snaps, readArchiveFile(t, f).Snapshots...)
	}
	return snaps
}

func sorted(ids []int64) []int64 { return slices.Sorted(slices.Values(ids)) }

// TestMaintainReportsUnrepairableLedger: a ledger truncated by snapshots
// another tool expired cannot be repaired from the archive files; maintain
// fails naming the snapshot whose entry is gone, and changes nothing.
func TestMaintainReportsUnrepairableLedger(t *testing.T) {
	tbl, _ := maintainTable(t, 3)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	commitRanges(t, tbl, 3, 4)
	gone := *tbl.Head().ParentSnapshotID
	expireAllButLast(t, tbl, tbl)
	archive := namedArchives(tbl)
	_, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1})
	if err == nil || !strings.Contains(err.Error(), strconv.FormatInt(gone, 10)) {
		t.Fatalf("err %v, want an error naming snapshot %d, the head's parent", err, gone)
	}
	var le *snapshot.LostEntriesError
	if !errors.As(err, &le) || !slices.Equal(le.Snapshots, []int64{gone}) || !slices.Equal(le.Refs, []string{"main"}) {
		t.Fatalf("err %v, want a *LostEntriesError for snapshot %d alone, truncating main", err, gone)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := namedArchives(tbl); !slices.Equal(got, archive) {
		t.Fatalf("the table names archive files %v after a failed repair, want %v unchanged", got, archive)
	}
}

// TestExpiryAfterCompactionDeletesQuietly: an expiry deletes the files a
// compaction replaced once the snapshots that had them are gone; a later
// expiry of the compaction's own snapshot, whose manifest lists those
// files as deleted, neither deletes them again nor warns that it could
// not (main warned "snapshots expired, but deleting their files failed
// ... no such file or directory" for each). The data folder then holds
// exactly the live data files.
func TestExpiryAfterCompactionDeletesQuietly(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.expire", snapshot.OpenOptions{Create: true})
	// Manifests merged at every commit, as a long-lived table's are: the
	// compaction's manifest is then not carried into later snapshots.
	if err := tbl.SetProperties(t.Context(), map[string]string{table.ManifestMinMergeCountKey: "2"}); err != nil {
		t.Fatal(err)
	}
	smallFiles(t, tbl, 0, 4, 5)
	if res, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil || res.Replaced != 8 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	smallFiles(t, tbl, 4, 2, 5)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	expire := func(keep int) {
		t.Helper()
		if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: keep, Logger: log}); err != nil {
			t.Fatal(err)
		}
	}
	expire(3) // the four snapshots before the compaction: its 8 replaced files go
	smallFiles(t, tbl, 6, 2, 5)
	expire(1) // the compaction's snapshot too
	if strings.Contains(logs.String(), "deleting their files failed") {
		t.Errorf("expiry warned:\n%s", logs.String())
	}
	live := map[string]bool{}
	for _, f := range liveDataFiles(t, tbl) {
		live[strings.TrimPrefix(f.Path, "file://")] = true
	}
	var onDisk []string
	dir := strings.TrimPrefix(tbl.DataLocation(), "file://")
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			onDisk = append(onDisk, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range onDisk {
		if !live[p] {
			t.Errorf("%s is left on disk, no snapshot has it", p)
		}
	}
	if len(onDisk) != len(live) {
		t.Errorf("%d parquet files on disk, %d live", len(onDisk), len(live))
	}
}
