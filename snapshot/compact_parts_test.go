package snapshot_test

import (
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/snapshot"
)

// TestCompactInParts: a compaction that replaces more than
// CompactOptions.CommitBytes commits in parts, each a compaction snapshot
// of its own groups, so that no part's files wait for the rewrite of the
// whole backlog (a compaction does not commit files older than half an
// hour: one commit of a large table's backlog never committed). The rows
// and the ledger are unchanged, and the result adds up the parts.
func TestCompactInParts(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.parts", snapshot.OpenOptions{Create: true})
	smallFiles(t, tbl, 0, 12, 5) // 24 files of [0, 60) in two partitions
	var size int64
	for _, f := range liveDataFiles(t, tbl) {
		size = max(size, f.SizeBytes)
	}
	rows, ledger, before := snapshotRows(t, tbl, 0), must(tbl.Ledger()), tbl.Head().SnapshotID
	// Two small files fit a target, three do not; a part holds one group.
	res, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 2*size + size/2, CommitBytes: 3 * size})
	if err != nil {
		t.Fatal(err)
	}
	if res.Groups < 4 || res.Commits != res.Groups || res.Replaced != 24 {
		t.Fatalf("compaction: %+v, want a commit per group of at least 4", res)
	}
	var commits, added int
	var replacedRows int64
	for _, s := range table.AncestorsOf(tbl.Head().SnapshotID, tbl.Iceberg().Metadata().SnapshotByID) {
		if s.SnapshotID == before {
			break
		}
		if !tbl.IsCompaction(s.SnapshotID) || s.Summary.Operation != table.OpReplace {
			t.Fatalf("snapshot %d since the compaction began is not one: %v", s.SnapshotID, s.Summary)
		}
		commits++
		n, _ := strconv.Atoi(s.Summary.Properties[snapshot.KeyCompactAdded])
		r, _ := strconv.ParseInt(s.Summary.Properties[snapshot.KeyCompactRows], 10, 64)
		added, replacedRows = added+n, replacedRows+r
	}
	if commits != res.Commits || added != res.Added || replacedRows != res.Rows || res.SnapshotID != tbl.Head().SnapshotID {
		t.Errorf("%d compaction snapshots adding %d files of %d rows, head %d; result %+v", commits, added, replacedRows, tbl.Head().SnapshotID, res)
	}
	if live := len(liveDataFiles(t, tbl)); live != res.FilesAfter || live != 24-res.Replaced+res.Added {
		t.Errorf("%d live files, result %+v", live, res)
	}
	if got := snapshotRows(t, tbl, 0); !slices.Equal(got, rows) {
		t.Errorf("rows changed by compaction:\n%s\nwant\n%s", joinLines(got), joinLines(rows))
	}
	if got := must(tbl.Ledger()); !reflect.DeepEqual(got, ledger) {
		t.Errorf("ledger changed by compaction:\n%v\nwant\n%v", got, ledger)
	}
}
