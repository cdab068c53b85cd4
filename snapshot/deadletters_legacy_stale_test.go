package snapshot_test

import (
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestStaleRemovalKeepsLegacyDeadLetters (from a review): a dead-letter
// table holds a live commit's dead letter as an older floe wrote it (no
// commit id, null in floe_commit_id) in the same file as a later commit's
// dead letter (a compaction merged them). The data table is rolled back
// past the later commit only. Reconciling removes the later commit's dead
// letter and keeps the older one, which the live commit's range accounts
// for: the copy-on-write delete of floe_commit_id IN (stale ids) dropped
// it too, its complement being null for a null id (commitIn).
func TestStaleRemovalKeepsLegacyDeadLetters(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 1}}, testRec{offset: 0, value: "ok"})
	c1 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 1, High: 3}, 2)
	withoutCommitIDs(t, dlq, 1) // c1's dead letter as an older floe wrote it
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 3, High: 5}, 4)
	if res, err := dlq.Compact(t.Context(), snapshot.CompactOptions{Logger: floetest.QuietLogger()}); err != nil || res.FilesAfter != 1 {
		t.Fatalf("compacting %s: %+v, %v", dlq.Name(), res, err)
	}
	wantDeadLetters(t, dlq, "t/0/2", "t/0/4")
	setMain(t, tbl, c1.Commit.SnapshotID) // roll back past the second commit only
	reconcile(t, tbl, dlq)
	if got := deadLetters(t, dlq); len(got) != 1 || got[0] != "t/0/2" {
		t.Errorf("after the reconcile %s holds dead letters %v, want [t/0/2]: the live commit's dead letter was deleted", dlq.Name(), got)
	}
	rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil || !rep.Complete() {
		t.Errorf("audit after the reconcile: %v, findings %+v", err, rep.Findings)
	}
}
