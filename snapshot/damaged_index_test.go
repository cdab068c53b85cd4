package snapshot_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestDamagedIndexFolderFileDegrades: the files of the archive index
// folder are derived from the segment, which alone holds the ledger. A
// damaged one (here emptied, as a second maintainer rewriting a legacy
// segment's index leaves it on local storage while it writes, or for good
// when it is killed then) does not fail the ledger's readers: a damaged
// index or summaries file is rebuilt from the segment (readIndex; a
// legacy segment's is written again by writeMissingIndexes, see
// TestSegmentsWithoutIndexes), and a damaged summaries file is read
// through the blocks it summarises (found by review: Locate and
// FirstCovering failed on it for as long as the segment was named).
func TestDamagedIndexFolderFileDegrades(t *testing.T) {
	tbl, _ := maintainTable(t, 6)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(metadataDir(tbl), "floe-ledger-index")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("index folder: %v, %d files", err, len(entries))
	}
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	for _, e := range entries {
		f := filepath.Join(dir, e.Name())
		saved, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		// A maintain run goes by, then a reader opens the table.
		m, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Maintain(t.Context(), snapshot.MaintainOptions{}); err != nil {
			t.Fatalf("%s truncated: maintain: %v", e.Name(), err)
		}
		r, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		loc, err := r.Locate(t.Context(), 0, tp, 5)
		if err != nil || loc.Status != mapping.StatusCovered {
			t.Errorf("%s truncated, after a maintain run: Locate of an archived offset: %v, %v; want it covered", e.Name(), loc.Status, err)
		}
		if _, err := r.FirstCovering(t.Context(), 0, mapping.Cut{tp: 5}); err != nil {
			t.Errorf("%s truncated, after a maintain run: FirstCovering: %v", e.Name(), err)
		}
		if err := os.WriteFile(f, saved, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
