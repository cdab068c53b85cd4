package snapshot_test

import (
	"slices"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewS65UpsertCompactPartsRollbackToBase: an upsert table's
// compaction in parts whose first part committed, then main was rolled
// back to the snapshot the compaction planned on (an operator undoing
// the compaction snapshot they saw, with an Iceberg engine's
// rollback_to_snapshot) before the second part committed. The second
// part's retry reloads and checks only that the planned-on snapshot is
// still in main's history, which it is (it is main's head), and the last
// part drops every delete file the whole plan made obsolete: those of the
// first part's files too, which the rollback made live again. The old
// values of every key (and the tombstoned k4) come back.
func TestReviewS65UpsertCompactPartsRollbackToBase(t *testing.T) {
	const name = "lake.s65_rollback"
	sink, _, size, cat := upsertParts(t, name)
	want := []string{"0/020 k1=v5", "0/021 k2=v5", "0/022 k3=v5"}
	if got := snapshotRows(t, sink, 0); !slices.Equal(got, want) {
		t.Fatalf("rows before the compaction:\n%s", joinLines(got))
	}
	before := sink.Head().SnapshotID
	hc := &hookCatalog{Catalog: cat}
	hc.beforeCommit = func() { // before part 1
		hc.beforeCommit = func() { // before part 2: part 1 landed
			if err := sink.Refresh(t.Context()); err != nil {
				t.Error(err)
				return
			}
			setMain(t, sink, before)
		}
	}
	comp := openTestTable(t, hc, name, snapshot.OpenOptions{})
	res, err := comp.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, CommitBytes: 2 * size})
	t.Logf("compaction: %+v, %v", res, err)
	fresh := openTestTable(t, cat, name, snapshot.OpenOptions{})
	if got := snapshotRows(t, fresh, 0); !slices.Equal(got, want) {
		t.Errorf("rows after a compaction whose first part was rolled back:\n%s\nwant\n%s", joinLines(got), joinLines(want))
	}
	rep, err := audit.Run(t.Context(), fresh, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("audit finding %s: %s", f.Kind, f.Detail)
	}
}
