package snapshot_test

import (
	"errors"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestFilelessCommitReadsNoManifest: a commit without data files (only
// markers, aborted records or a recorded loss) must not read the table's
// manifests: iceberg-go's duplicate check would read every one of them, a
// cost that grows with the table. The proof: with a manifest of the head
// made unreadable, a file-less commit still lands.
func TestFilelessCommitReadsNoManifest(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.markers", snapshot.OpenOptions{Create: true})
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 2}}, testRec{partition: 0, offset: 0, value: "a"}, testRec{partition: 0, offset: 1, value: "b"})
	fsys, err := tbl.Iceberg().FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := tbl.Head().Manifests(fsys)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		if err := os.Remove(strings.TrimPrefix(m.FilePath(), "file://")); err != nil {
			t.Fatal(err)
		}
	}
	markers := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: 0}, Interval: mapping.Interval{Low: 2, High: 3}}
	if _, err := tbl.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{markers}}, snapshot.CommitOptions{Writer: "test"}); err != nil {
		t.Fatalf("a commit without data files read the manifests: %v", err)
	}
}

// TestCommitsKeepNoHistoryAlive: a writer's memory must not grow with the
// number of commits it made. The table iceberg-go returns from a commit
// keeps the metadata it was built on reachable; adopting it commit after
// commit kept every earlier metadata version alive (120 MB of heap after
// 300 commits of one table, growing with the square of the commits).
func TestCommitsKeepNoHistoryAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("commits 300 snapshots")
	}
	tbl := openTestTable(t, tempCatalog(t), "lake.history", snapshot.OpenOptions{Create: true})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var before, peak uint64
	for i := range int64(300) {
		if i%50 == 0 && i > 0 {
			h := heap()
			if before == 0 {
				before = h
			}
			peak = max(peak, h)
		}
		var rs []mapping.Range
		for p := range int32(4) {
			rs = append(rs, mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: p}, Interval: mapping.Interval{Low: i, High: i + 1}})
		}
		if _, err := tbl.Commit(t.Context(), snapshot.Flush{Ranges: rs}, snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	// 250 more snapshots add about 250 KB of metadata; the leak added 50 to
	// 100 MB.
	if grew := int64(peak) - int64(before); grew > 16<<20 {
		t.Fatalf("heap grew by %d MB over 250 commits: the table keeps earlier metadata versions alive", grew>>20)
	}
}

// TestCommitFencedWhenPartitionVanishes: when a writer's commit loses the
// race and the reloaded ledger no longer has one of its partitions (an
// operator rolled the table back, or published a branch without it), the
// writer is fenced. Retrying on top would restart the partition at the
// writer's offset, and the offsets below it would never be sunk.
func TestCommitFencedWhenPartitionVanishes(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.rollback", snapshot.OpenOptions{Create: true})
	commit := func(p int32, low, high int64) error {
		r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: p}, Interval: mapping.Interval{Low: low, High: high}}
		_, err := tbl.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{r}}, snapshot.CommitOptions{Writer: "test"})
		return err
	}
	if err := commit(1, 0, 5); err != nil {
		t.Fatal(err)
	}
	before := tbl.Head().SnapshotID
	if err := commit(0, 0, 10); err != nil {
		t.Fatal(err)
	}
	// An operator rolls main back, from a handle of their own.
	op := openTestTable(t, cat, "lake.rollback", snapshot.OpenOptions{})
	txn := op.Iceberg().NewTransaction()
	if err := txn.RollbackToSnapshot(before); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := commit(0, 10, 20)
	var fenced *snapshot.FencedError
	if !errors.As(err, &fenced) || !fenced.Vanished {
		t.Fatalf("err = %v, want a FencedError for a vanished partition", err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := l.Next()[mapping.TopicPartition{Topic: "t", Partition: 0}]; ok {
		t.Fatalf("partition 0 is in the ledger at %d after the fenced commit; the rollback removed it", n)
	}
}

// TestLedgerDecodedIncrementally: a writer's ledger, extended commit by
// commit from what it already decoded, equals the ledger a fresh reader
// decodes from the metadata, also with another writer committing between.
func TestLedgerDecodedIncrementally(t *testing.T) {
	cat := tempCatalog(t)
	a := openTestTable(t, cat, "lake.inc", snapshot.OpenOptions{Create: true})
	b := openTestTable(t, cat, "lake.inc", snapshot.OpenOptions{})
	commit := func(tbl *snapshot.Table, p int32, i int64) {
		r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: p}, Interval: mapping.Interval{Low: i, High: i + 1}, Records: 0}
		if _, err := tbl.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{r}}, snapshot.CommitOptions{Writer: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int64(12) {
		commit(a, 0, i)
		if i%4 == 3 {
			if err := b.Refresh(t.Context()); err != nil {
				t.Fatal(err)
			}
			commit(b, 1, i/4)
		}
		got, err := a.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		fresh := openTestTable(t, cat, "lake.inc", snapshot.OpenOptions{})
		want, err := fresh.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		if i%4 != 3 && !reflect.DeepEqual(got, want) {
			t.Fatalf("after commit %d: writer's ledger\n%+v\nfresh reader's\n%+v", i, got, want)
		}
	}
}

// TestCommitAppliedButAnswerLost: a commit the catalog applied but whose
// answer was lost is found in the ledger by the retry (its ranges are
// then covered: settle looks it up by its id), which returns it as
// committed: its files stay, and the ledger holds it once. Were the
// lookup skipped, the retry would take the ledger's advance for another
// writer's, report the flush fenced and delete the files of a commit that
// landed.
func TestCommitAppliedButAnswerLost(t *testing.T) {
	cat := tempCatalog(t)
	openTestTable(t, cat, "lake.lost", snapshot.OpenOptions{Create: true})
	lose := &atomic.Bool{}
	tbl := openTestTable(t, lostAnswer{Catalog: cat, lost: lose}, "lake.lost", snapshot.OpenOptions{})
	smallFiles(t, tbl, 0, 3, 5) // [0, 15) in both partitions
	lose.Store(true)
	smallFiles(t, tbl, 3, 1, 5) // [15, 20): applied, answer lost
	if lose.Load() {
		t.Fatal("no commit answer was lost: the test proved nothing")
	}
	l := must(tbl.Ledger())
	if len(l.Commits) != 4 {
		t.Fatalf("the ledger holds %d commits, want 4 (the lost answer's once)", len(l.Commits))
	}
	fresh := openTestTable(t, cat, "lake.lost", snapshot.OpenOptions{})
	if rows := snapshotRows(t, fresh, 0); len(rows) != 40 {
		t.Fatalf("%d rows readable, want 40", len(rows))
	}
}

// TestCommitAnswerLostThenRolledBackKeepsFiles: a commit lands but its
// answer is lost, and before the retry reloads an operator rolls main back
// past it. The retry is fenced (the ledger no longer ends where the flush
// starts), but the rolled-back snapshot still names the flush's files:
// deleting them, as a never-landed commit's, broke that snapshot for time
// travel and for an undo of the rollback (from a review). They are kept
// for expiry to collect with the snapshot.
func TestCommitAnswerLostThenRolledBackKeepsFiles(t *testing.T) {
	cat := tempCatalog(t)
	op := openTestTable(t, cat, "lake.undo", snapshot.OpenOptions{Create: true})
	smallFiles(t, op, 0, 2, 5) // [0, 10) in both partitions, two commits
	first := op.Iceberg().Metadata().Snapshots()[0].SnapshotID
	var landed int64
	tbl := openTestTable(t, rollbackAfterLanding(t, cat, op, first, &landed), "lake.undo", snapshot.OpenOptions{})
	f := flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 10, High: 12}, 1: {Low: 10, High: 12}},
		testRec{partition: 0, offset: 10, value: "x"}, testRec{partition: 0, offset: 11, value: "y"},
		testRec{partition: 1, offset: 10, value: "x"}, testRec{partition: 1, offset: 11, value: "y"})
	_, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"})
	if landed == 0 {
		t.Fatal("the commit did not land before the rollback: the test proved nothing")
	}
	if fenced, ok := errors.AsType[*snapshot.FencedError](err); !ok || fenced.Kept != landed {
		t.Fatalf("err = %v, want a FencedError keeping snapshot %d: the rollback moved the ledger's end below the flush", err, landed)
	}
	fresh := openTestTable(t, cat, "lake.undo", snapshot.OpenOptions{})
	files, err := fresh.Files(t.Context(), landed)
	if err != nil {
		t.Fatal(err)
	}
	for _, df := range files {
		if _, err := os.Stat(strings.TrimPrefix(df.Path, "file://")); err != nil {
			t.Fatalf("snapshot %d, rolled back but kept, names data file %s, deleted by the fenced retry: %v", landed, df.Path, err)
		}
	}
	if n := len(snapshotRows(t, fresh, landed)); n != 24 {
		t.Fatalf("rolled-back snapshot %d reads %d rows, want 24", landed, n)
	}
	setMain(t, fresh, landed)
	if n := len(snapshotRows(t, fresh, 0)); n != 24 {
		t.Fatalf("main set back to snapshot %d (the rollback undone) reads %d rows, want 24", landed, n)
	}
}

// TestCommitToDroppedTable: the table is dropped (floe drop) while a
// writer commits to it. The writer says so at once, where it retried five
// times and said whether its commit was applied was unknown and the next
// run would resume from the ledger, which was gone (from a new-user run).
func TestCommitToDroppedTable(t *testing.T) {
	cat := tempCatalog(t)
	op := openTestTable(t, cat, "lake.dropped", snapshot.OpenOptions{Create: true})
	hc := &hookCatalog{Catalog: cat, beforeCommit: func() {
		if err := cat.DropTable(t.Context(), op.Identifier()); err != nil {
			t.Error(err)
		}
	}}
	tbl := openTestTable(t, hc, "lake.dropped", snapshot.OpenOptions{})
	f := flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 1}}, testRec{partition: 0, offset: 0, value: "x"})
	_, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"})
	if err == nil || !strings.Contains(err.Error(), "the table was dropped or renamed while this writer was committing to it") {
		t.Fatalf("err = %v, want one saying the table was dropped", err)
	}
}

// rollbackAfterLanding is a catalog whose next commit lands and answers
// an error (its answer lost), after main was set back to snapshot to from
// op, as an operator's rollback between the landing and the retry;
// *landed gets the snapshot that landed.
func rollbackAfterLanding(t *testing.T, cat icecat.Catalog, op *snapshot.Table, to int64, landed *int64) *hookCatalog {
	return &hookCatalog{Catalog: cat, loseReply: true, afterLanding: func() {
		if err := op.Refresh(t.Context()); err != nil {
			t.Error(err)
			return
		}
		*landed = op.Head().SnapshotID
		setMain(t, op, to)
	}}
}

// TestCommitLandedRolledBackRefitKeepsFiles: a commit lands unanswered;
// before the retry reloads, an operator rolls main back to just before it
// (the ledger ends where the flush starts again: no fence) and another
// writer changes the partition spec. The retry writes the flush's rows
// again for the new spec and commits them, and keeps the first files,
// which the rolled-back snapshot names (it deleted them; from a review).
func TestCommitLandedRolledBackRefitKeepsFiles(t *testing.T) {
	cat := tempCatalog(t)
	op := openTestTable(t, cat, "lake.refit", snapshot.OpenOptions{Create: true})
	smallFiles(t, op, 0, 2, 5) // [0, 10) in both partitions
	before := op.Head().SnapshotID
	var landed int64
	hc := rollbackAfterLanding(t, cat, op, before, &landed)
	rollback := hc.afterLanding
	hc.afterLanding = func() {
		rollback()
		openTestTable(t, cat, "lake.refit", snapshot.OpenOptions{PartitionBy: partitionBy(t, "identity(kafka_partition)")})
	}
	tbl := openTestTable(t, hc, "lake.refit", snapshot.OpenOptions{})
	f := flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 10, High: 12}, 1: {Low: 10, High: 12}},
		testRec{partition: 0, offset: 10, value: "x"}, testRec{partition: 0, offset: 11, value: "y"},
		testRec{partition: 1, offset: 10, value: "x"}, testRec{partition: 1, offset: 11, value: "y"})
	if _, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"}); err != nil {
		t.Fatalf("the retry after the rollback: %v", err)
	}
	if landed == 0 {
		t.Fatal("the commit did not land before the rollback: the test proved nothing")
	}
	fresh := openTestTable(t, cat, "lake.refit", snapshot.OpenOptions{})
	if n := len(snapshotRows(t, fresh, landed)); n != 24 {
		t.Fatalf("rolled-back snapshot %d reads %d rows, want 24", landed, n)
	}
	if n := len(snapshotRows(t, fresh, 0)); n != 24 {
		t.Fatalf("main reads %d rows after the retry, want 24", n)
	}
}

// TestReserveSchemaAnswerLost: a schema reservation the catalog applied
// but whose answer was lost is found by the reload that follows, and the
// table as committed returned; it was an error, which restarted the sink
// session.
func TestReserveSchemaAnswerLost(t *testing.T) {
	cat := tempCatalog(t)
	opts := snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Value: mapping.ValueJSON}}
	openTestTable(t, cat, "lake.reserve", opts)
	lose := &atomic.Bool{}
	tbl := openTestTable(t, lostAnswer{Catalog: cat, lost: lose}, "lake.reserve", snapshot.OpenOptions{})
	cur := tbl.Iceberg().Schema()
	want := iceberg.NewSchema(cur.ID, append(slices.Clone(cur.Fields()), iceberg.NestedField{ID: cur.HighestFieldID() + 1, Name: "amount", Type: iceberg.PrimitiveTypes.Int64})...)
	lose.Store(true)
	reserved, err := tbl.ReserveSchema(t.Context(), tbl.Iceberg(), want)
	if err != nil {
		t.Fatalf("reservation whose answer was lost: %v", err)
	}
	if lose.Load() {
		t.Fatal("no commit answer was lost: the test proved nothing")
	}
	if _, ok := reserved.Schema().FindFieldByName("amount"); !ok {
		t.Fatalf("the returned table has no column amount: %v", reserved.Schema())
	}
	if n := len(reserved.Schemas()); n != 2 {
		t.Fatalf("the table has %d schemas, want 2 (the reservation once)", n)
	}
}
