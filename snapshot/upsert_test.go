package snapshot_test

import (
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestUpsertTruncate commits flushes to an upsert table keyed by the
// Kafka key, one of them with a truncate (Flush.Truncated: a change event
// of a truncate, for --on-truncate delete-all): the truncate removes every
// row committed before it and the flush's rows of its partition below it,
// keeps the flush's later rows and other partitions' rows, and upserts go
// on after it with equality deletes. Rows are read with iceberg-go's scan.
func TestUpsertTruncate(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.upserts", snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	tp0 := mapping.TopicPartition{Topic: "t", Partition: 0}
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 2}, 1: {Low: 0, High: 1}},
		testRec{0, 0, "k1", "a", 0}, testRec{0, 1, "k2", "b", 0}, testRec{1, 0, "k3", "c", 0})
	if got := joinLines(snapshotRows(t, tbl, 0)); got != "0/000 k1=a\n0/001 k2=b\n1/000 k3=c" {
		t.Fatalf("first commit:\n%s", got)
	}

	// Offset 3 of partition 0 truncates: k1=d (offset 2) goes with the
	// rows before; k4 (offset 4) and partition 1's k5 stay.
	f := flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 2, High: 5}, 1: {Low: 1, High: 2}},
		testRec{0, 2, "k1", "d", 0}, testRec{0, 4, "k4", "e", 0}, testRec{1, 1, "k5", "f", 0})
	f.Truncated = map[mapping.TopicPartition]int64{tp0: 3}
	for i, r := range f.Ranges {
		if r.TopicPartition == tp0 {
			f.Ranges[i].Deletes = 1
		}
	}
	res := commitFlush(t, tbl, f)
	if got := joinLines(snapshotRows(t, tbl, 0)); got != "0/004 k4=e\n1/001 k5=f" {
		t.Fatalf("after the truncate:\n%s", got)
	}
	if res.Rows != 2 {
		t.Fatalf("%d rows, want 2", res.Rows)
	}

	// A tombstone of k4 and a new k1 after it: equality deletes again.
	f = flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 5, High: 7}},
		testRec{0, 5, "k4", "-", 0}, testRec{0, 6, "k1", "g", 0})
	f.Deletes = map[mapping.TopicPartition][]int64{tp0: {5}}
	f.Ranges[0].Records, f.Ranges[0].Deletes = 1, 1
	commitFlush(t, tbl, f)
	if got := joinLines(snapshotRows(t, tbl, 0)); got != "0/006 k1=g\n1/001 k5=f" {
		t.Fatalf("after the tombstone:\n%s", got)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	c := mapping.Cover(l.Ranges(tp0))
	if c.Records != 5 || c.Deletes != 2 || c.Next != 7 {
		t.Fatalf("partition 0: %+v", c)
	}
}
