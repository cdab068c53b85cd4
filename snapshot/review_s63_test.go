package snapshot_test

import (
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/mapping"
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

// checkWhole checks table name of cat as a fresh handle reads it, after
// stage: every snapshot it keeps scans, its head holds rows rows, its
// ledger commits commits, and the rows level audit finds nothing.
func checkWhole(t *testing.T, cat icecat.Catalog, name, stage string, rows, commits int) {
	t.Helper()
	fresh := openTestTable(t, cat, name, snapshot.OpenOptions{})
	scanEverySnapshot(t, fresh)
	if got := len(snapshotRows(t, fresh, 0)); got != rows {
		t.Errorf("%s: head holds %d rows, want %d", stage, got, rows)
	}
	l, err := fresh.Ledger()
	if err != nil || len(l.Commits) != commits {
		t.Fatalf("%s: ledger of %d commits, %v; want %d", stage, len(l.Commits), err, commits)
	}
	rep, err := audit.Run(t.Context(), fresh, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 0 {
		t.Errorf("%s: audit findings %v", stage, rep.Findings)
	}
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

// scanEverySnapshot reads every snapshot the table keeps, failing on one
// that names a file the storage no longer has.
func scanEverySnapshot(t *testing.T, tbl *snapshot.Table) {
	t.Helper()
	for _, s := range tbl.Iceberg().Metadata().Snapshots() {
		if _, err := tbl.Iceberg().Scan(table.WithSnapshotID(s.SnapshotID)).ToArrowTable(t.Context()); err != nil {
			t.Errorf("snapshot %d the table keeps cannot be read: %v", s.SnapshotID, err)
		}
	}
}

// TestReviewS63ExpiryRacingCompaction: a compaction lands between an
// expiry's planning and its commit (floe maintain beside a sink's
// scheduled compaction); the expiry loses its race, plans again on the
// compacted table and deletes only what no kept snapshot needs: every
// snapshot kept still reads, the head reads the same rows, the ledger is
// whole, and a deep audit finds nothing. Then a second expiry removes the
// compaction's parents, deleting the replaced files, and the same holds.
func TestReviewS63ExpiryRacingCompaction(t *testing.T) {
	cat := tempCatalog(t)
	sink := openTestTable(t, cat, "lake.exprace", snapshot.OpenOptions{Create: true})
	smallFiles(t, sink, 0, 6, 5)
	hc := &hookCatalog{Catalog: cat}
	maint := openTestTable(t, hc, "lake.exprace", snapshot.OpenOptions{})
	comp := openTestTable(t, cat, "lake.exprace", snapshot.OpenOptions{})
	hc.beforeCommit = func() {
		if _, err := comp.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Error(err)
		}
		smallFiles(t, sink, 6, 1, 5)
	}
	res, err := maint.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 3, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) == 0 {
		t.Fatal("nothing expired")
	}
	if hc.beforeCommit != nil || !slices.ContainsFunc(maint.Iceberg().Metadata().Snapshots(), func(s table.Snapshot) bool { return maint.IsCompaction(s.SnapshotID) }) {
		t.Fatal("the compaction did not land before the expiry's commit")
	}
	smallFiles(t, sink, 7, 1, 5)
	check := func(stage string) { t.Helper(); checkWhole(t, cat, "lake.exprace", stage, 80, 8) }
	check("after the raced expiry")
	if _, err := maint.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, RemoveOrphans: true, OrphanMinAge: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	check("after expiring all but the head")
}

// TestReviewS63UpsertCompactionExpiryOrphans: an upsert table whose keys
// a sink keeps updating and deleting is compacted (the deletes applied and
// dropped) while a sink commit lands between the compaction's planning
// and its commit, then every snapshot but the head is expired and orphans
// are removed: the table holds each key's latest value, no key twice and
// no deleted key back, at every step, and every kept snapshot reads.
func TestReviewS63UpsertCompactionExpiryOrphans(t *testing.T) {
	cat := tempCatalog(t)
	sink := openTestTable(t, cat, "lake.upexp", snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	off := int64(0)
	commit := func(kv ...string) {
		t.Helper()
		var recs []testRec
		var dels []int64
		for i := 0; i < len(kv); i += 2 {
			recs = append(recs, testRec{0, off, kv[i], kv[i+1], 0})
			if kv[i+1] == "-" {
				dels = append(dels, off)
			}
			off++
		}
		f := flushOf(t, sink, map[int32]mapping.Interval{0: {Low: off - int64(len(recs)), High: off}}, recs...)
		f.Deletes = map[mapping.TopicPartition][]int64{{Topic: "t", Partition: 0}: dels}
		f.Ranges[0].Records, f.Ranges[0].Deletes = int64(len(recs)-len(dels)), int64(len(dels))
		commitFlush(t, sink, f)
	}
	commit("k1", "a", "k2", "b", "k3", "c")
	commit("k1", "d", "k2", "-")
	commit("k3", "e", "k4", "f")
	hc := &hookCatalog{Catalog: cat}
	comp := openTestTable(t, hc, "lake.upexp", snapshot.OpenOptions{})
	hc.beforeCommit = func() {
		if err := sink.Refresh(t.Context()); err != nil {
			t.Error(err)
			return
		}
		// The sink updates k1 and deletes k4 while the compaction rewrites.
		commit("k1", "g", "k4", "-", "k2", "h")
	}
	res, err := comp.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil || res.SnapshotID == 0 || res.Attempts < 2 || res.DroppedDeletes == 0 {
		t.Fatalf("compaction beside a sink commit: %+v, %v; want it committed at a second attempt, dropping deletes", res, err)
	}
	want := "0/005 k3=e\n0/007 k1=g\n0/009 k2=h"
	rowsOf := func(stage string) {
		t.Helper()
		fresh := openTestTable(t, cat, "lake.upexp", snapshot.OpenOptions{})
		scanEverySnapshot(t, fresh)
		if got := joinLines(snapshotRows(t, fresh, 0)); got != want {
			t.Errorf("%s: rows\n%s\nwant\n%s", stage, got, want)
		}
		rep, err := audit.Run(t.Context(), fresh, audit.Options{Depth: audit.DepthRows})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Findings) != 0 {
			t.Errorf("%s: audit findings %v", stage, rep.Findings)
		}
	}
	rowsOf("after the compaction")
	if err := sink.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	commit("k3", "i")
	want = "0/007 k1=g\n0/009 k2=h\n0/010 k3=i"
	if _, err := sink.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, RemoveOrphans: true, OrphanMinAge: time.Nanosecond, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	rowsOf("after expiring all but the head")
	// A second compaction over the first one's files and the sink's.
	if _, err := sink.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	rowsOf("after a second compaction")
}

// TestReviewS63ExpiryAnswerLostThenCleanup: a table of lane file groups
// (commits sharing files across Kafka partitions) and a compaction of
// them; an expiry's commit lands but its answer is lost (as a process
// killed right after its commit: the expired snapshots' files are not
// deleted, nor the segments its new one absorbed), and a sink commits
// meanwhile. The next floe maintain --remove-orphans --compact collects
// what the lost run left and compacts again: no file a kept snapshot
// references is deleted, every kept snapshot reads, the ledger is whole,
// the file groups still place every file, and a deep audit finds nothing.
func TestReviewS63ExpiryAnswerLostThenCleanup(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.lostexp", snapshot.OpenOptions{Create: true})
	lane := lanes(t, tbl)
	for range 4 {
		lane(3, 0, 1, 2, 3, 4)
	}
	quiet := slog.New(slog.DiscardHandler)
	if _, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		lane(3, 0, 1, 2, 3, 4)
	}
	// An earlier expiry, so that the lost one absorbs a segment.
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 6, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	hc := &hookCatalog{Catalog: cat, loseReply: true}
	hc.afterLanding = func() { lane(3, 0, 1, 2, 3, 4) }
	killed := openTestTable(t, hc, "lake.lostexp", snapshot.OpenOptions{})
	if _, err := killed.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2, Logger: quiet}); err == nil {
		t.Fatal("the expiry whose answer was lost reported success")
	}
	want := 8 * 5 * 3
	check := func(stage string) { t.Helper(); checkWhole(t, cat, "lake.lostexp", stage, want, 8) }
	check("after the lost expiry")
	before := len(dataFilesOnDisk(t, tbl))
	backdate(t, dataFilesOnDisk(t, tbl)...)
	maint := openTestTable(t, cat, "lake.lostexp", snapshot.OpenOptions{})
	res, err := maint.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Orphans) == 0 {
		t.Errorf("the lost expiry's files (%d data files on disk) were not collected", before)
	}
	check("after removing orphans")
	if _, err := maint.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if _, err := maint.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, RemoveOrphans: true, OrphanMinAge: time.Nanosecond, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	check("after compacting and expiring to the head")
}
