package snapshot_test

import (
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

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
		floetest.ForeignEqualityDelete(t, fresh.Iceberg(), 0, 7)
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
		floetest.ForeignEqualityDelete(t, fresh.Iceberg(), 1, 3)
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
