package snapshot_test

import (
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// foreignEqualityDelete commits, as another engine would (Spark's DELETE
// in merge-on-read mode), an equality delete of the rows of partition p at
// offset off of the floe table tbl.
func foreignEqualityDelete(t *testing.T, tbl *table.Table, p int32, off int64) {
	t.Helper()
	ctx := t.Context()
	sc := tbl.Schema()
	pf, ok := sc.FindFieldByName(mapping.ColPartition)
	if !ok {
		t.Fatal("no partition column")
	}
	of, ok := sc.FindFieldByName(mapping.ColOffset)
	if !ok {
		t.Fatal("no offset column")
	}
	keySc := arrow.NewSchema([]arrow.Field{
		{Name: mapping.ColPartition, Type: arrow.PrimitiveTypes.Int32, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(pf.ID)})},
		{Name: mapping.ColOffset, Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(of.ID)})},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, keySc)
	b.Field(0).(*array.Int32Builder).Append(p)
	b.Field(1).(*array.Int64Builder).Append(off)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	txn := tbl.NewTransaction()
	deletes, err := txn.WriteEqualityDeletes(ctx, []int{pf.ID, of.ID}, one(rec))
	if err != nil {
		t.Fatalf("write foreign equality delete: %v", err)
	}
	if err := txn.NewRowDelta(nil).AddDeletes(deletes...).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatalf("commit foreign equality delete: %v", err)
	}
}

// TestCompactAppendKeepsForeignDeleteThatLandsMidway (from a review): another
// engine deletes a row of an append table (an equality delete, as Spark's
// merge-on-read DELETE writes) between the compaction's planning and its
// commit. The compaction's first attempt loses the race, reloads, and
// commits its rewrite (planned when no delete applied to the files) on
// the new head: the new files hold the deleted row, with a sequence
// number above the delete's, so the delete no longer applies and the
// deleted row is back. Planned afresh, a file with a delete would not be
// merged at all (docs/maintenance.md: "Not merged: ... files of an append
// table with row-level deletes").
func TestCompactAppendKeepsForeignDeleteThatLandsMidway(t *testing.T) {
	cat := tempCatalog(t)
	a := openTestTable(t, cat, "lake.fdel", snapshot.OpenOptions{Create: true})
	smallFiles(t, a, 0, 3, 5) // [0, 15) in partitions 0 and 1: 6 small files
	hc := &hookCatalog{Catalog: cat}
	b, err := snapshot.Open(t.Context(), hc, a.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc.beforeCommit = func() {
		// Another engine deletes partition 0's offset 7 now.
		fresh := openTestTable(t, cat, "lake.fdel", snapshot.OpenOptions{})
		foreignEqualityDelete(t, fresh.Iceberg(), 0, 7)
		if n := len(snapshotRows(t, openTestTable(t, cat, "lake.fdel", snapshot.OpenOptions{}), 0)); n != 29 {
			t.Fatalf("the foreign delete left %d rows, want 29", n)
		}
	}
	res, err := b.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
	t.Logf("compaction: %+v, %v", res, err)
	after := openTestTable(t, cat, "lake.fdel", snapshot.OpenOptions{})
	rows := snapshotRows(t, after, 0)
	if len(rows) != 29 || slices.ContainsFunc(rows, func(r string) bool { return len(r) >= 5 && r[:5] == "0/007" }) {
		t.Errorf("after the compaction the table reads %d rows (want 29: 30 minus the row another engine deleted); row 0/007 present: %v",
			len(rows), slices.ContainsFunc(rows, func(r string) bool { return len(r) >= 5 && r[:5] == "0/007" }))
	}
}

// hookTurn is a CompactOptions.Turn that runs once, before its first
// Lock, what other writers do while the compaction rewrites its files.
type hookTurn struct {
	sync.Mutex
	before func()
}

func (h *hookTurn) Lock() {
	if f := h.before; f != nil {
		h.before = nil
		f()
	}
	h.Mutex.Lock()
}

// TestScheduledCompactionKeepsForeignDelete (from a review): the same with a
// sink's scheduled compaction (floe sink --compact-interval, on by
// default), which reloads the table at its first commit attempt: another
// engine's delete committed while it rewrote its files is taken in
// without any conflict, and the rewrite brings the deleted row back.
func TestScheduledCompactionKeepsForeignDelete(t *testing.T) {
	cat := tempCatalog(t)
	a := openTestTable(t, cat, "lake.fdel2", snapshot.OpenOptions{Create: true})
	smallFiles(t, a, 0, 3, 5)
	turn := &hookTurn{before: func() {
		fresh := openTestTable(t, cat, "lake.fdel2", snapshot.OpenOptions{})
		foreignEqualityDelete(t, fresh.Iceberg(), 1, 3)
		if n := len(snapshotRows(t, openTestTable(t, cat, "lake.fdel2", snapshot.OpenOptions{}), 0)); n != 29 {
			t.Fatalf("the foreign delete left %d rows, want 29", n)
		}
	}}
	res, err := a.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Turn: turn, Logger: slog.New(slog.DiscardHandler)})
	t.Logf("compaction: %+v, %v", res, err)
	after := openTestTable(t, cat, "lake.fdel2", snapshot.OpenOptions{})
	rows := snapshotRows(t, after, 0)
	has := slices.ContainsFunc(rows, func(r string) bool { return len(r) >= 5 && r[:5] == "1/003" })
	if len(rows) != 29 || has {
		t.Errorf("after the compaction the table reads %d rows (want 29: 30 minus the row another engine deleted); row 1/003 present: %v", len(rows), has)
	}
}
