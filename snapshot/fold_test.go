package snapshot_test

import (
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func TestFoldLatest(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.state", snapshot.OpenOptions{Create: true,
		Properties: map[string]string{mapping.PropFold: mapping.FoldLatest}})
	if tbl.Mode() != mapping.ModeFold {
		t.Fatalf("mode %q", tbl.Mode())
	}
	iv := func(lo, hi int64) mapping.Interval { return mapping.Interval{Low: lo, High: hi} }

	res := commitRecs(t, tbl, map[int32]mapping.Interval{0: iv(0, 5), 1: iv(0, 1)},
		testRec{0, 0, "a", "1", 0}, testRec{0, 1, "b", "1", 0}, testRec{0, 2, "c", "1", 0}, testRec{0, 4, "a", "2", 0},
		testRec{1, 0, "a", "9", 0})
	if res.Rows != 4 {
		t.Fatalf("first fold wrote %d rows, want 4 (a, b, c on 0; a on 1)", res.Rows)
	}
	first := tbl.Head().SnapshotID
	// A tombstone, an update, a new key, and a null key (dropped).
	commitRecs(t, tbl, map[int32]mapping.Interval{0: iv(5, 9)},
		testRec{0, 5, "b", "-", 0}, testRec{0, 6, "c", "3", 0}, testRec{0, 7, "d", "1", 0}, testRec{0, 8, "", "x", 0})
	// A deleted and re-created key, and a tombstone of a key never seen.
	commitRecs(t, tbl, map[int32]mapping.Interval{0: iv(9, 12)},
		testRec{0, 9, "a", "-", 0}, testRec{0, 10, "e", "-", 0}, testRec{0, 11, "a", "5", 0})

	want := joinLines([]string{"0/006 c=3", "0/007 d=1", "0/011 a=5", "1/000 a=9"})
	if got := joinLines(snapshotRows(t, tbl, 0)); got != want {
		t.Fatalf("state:\n%s\nwant:\n%s", got, want)
	}
	// Earlier snapshots keep their state: time travel works on a state table.
	if got := joinLines(snapshotRows(t, tbl, first)); got != joinLines([]string{"0/001 b=1", "0/002 c=1", "0/004 a=2", "1/000 a=9"}) {
		t.Fatalf("state at the first snapshot:\n%s", got)
	}
	// The ledger is the log's: contiguous, with the records folded.
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	c := mapping.Cover(l.Ranges(mapping.TopicPartition{Topic: "t", Partition: 0}))
	if c.First != 0 || c.Next != 12 || len(c.Gaps) != 0 || c.Records != 11 {
		t.Fatalf("ledger coverage %+v, want [0, 12) with 11 records (offset 3 was a marker)", c)
	}
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !f.HasBounds || f.PartitionMin != f.PartitionMax {
			t.Fatalf("file %s mixes partitions", f.Path)
		}
	}
}
