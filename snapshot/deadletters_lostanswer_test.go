package snapshot_test

import (
	"testing"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReconcileDeadLettersReportsCommitWhoseAnswerWasLost (from a
// review): a reconcile whose converging commit landed but lost its answer
// found the table converged on the retry and returned nothing done: the
// sink logged no "reconciled" line and floe maintain counted 0 commits
// added, though this call added them.
func TestReconcileDeadLettersReportsCommitWhoseAnswerWasLost(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	pendingCommit(t, cat, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	flaky := newFlakyCatalog(cat, 0, 0, 0)
	through, err := snapshot.OpenDeadLetters(t.Context(), flaky, dlq.Identifier(), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	flaky.lost.Store(1)
	res, err := tbl.ReconcileDeadLetters(t.Context(), through, floetest.QuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq, "t/0/1")
	if res.Added != 1 {
		t.Errorf("reconcile added the pending commit's dead letters (its commit's answer lost) and reports %+v; want Added 1", res)
	}
}
