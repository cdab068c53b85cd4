package snapshot_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// branchWithDeadLetters creates branch name of tbl and commits on it a
// range with a dead letter into the dead-letter table dlqName (created).
func branchWithDeadLetters(t *testing.T, cat icecat.Catalog, tbl *snapshot.Table, name string, dlqName []string, low int64) *snapshot.Table {
	t.Helper()
	if err := tbl.CreateEmptyBranch(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	br := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{Branch: name})
	bdlq, err := snapshot.OpenDeadLetters(t.Context(), cat, dlqName, tbl.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	mustDeadCommit(t, br, bdlq, "t", 0, mapping.Interval{Low: low, High: low + 2}, low+1)
	return br
}

func dlqExists(t *testing.T, cat icecat.Catalog, tbl *snapshot.Table, name []string) bool {
	t.Helper()
	_, err := snapshot.OpenDeadLetters(t.Context(), cat, name, tbl.Name(), false)
	if errors.Is(err, snapshot.ErrTableNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// TestReviewS61DropOfUnknownBranchSharingDeadLetterName: the table has a
// branch a_b (with its dead-letter table lake.orders_a_b_dlq) and no
// branch a-b. floe drop --branch a-b (a typo, or a name that never
// existed) must say the table has no branch a-b, as before b21c156; since
// it, the drop's Gone path counts lake.orders_a_b_dlq, kept because a_b's
// ledger names it, as "the branch was dropped before", and floe drop
// exits 0 saying "branch a-b of lake.orders was dropped before: nothing
// of it is left to drop" (--json: "dropped": true) while a_b stays.
func TestReviewS61DropOfUnknownBranchSharingDeadLetterName(t *testing.T) {
	cat, tbl, _ := deadLetterTables(t)
	branchWithDeadLetters(t, cat, tbl, "a_b", snapshot.BranchDeadLetterName(tbl.Identifier(), "a_b"), 0)
	got, err := tbl.DropRef(t.Context(), slog.New(slog.DiscardHandler), "a-b", snapshot.DropRefOptions{DryRun: true})
	if err == nil || !strings.Contains(err.Error(), "has no branch named a-b") {
		t.Fatalf("drop of branch a-b, which the table never had: %+v, err %v; want 'has no branch named a-b'", got, err)
	}
}

// TestReviewS61DropOfRecreatedBranchLosesCutShortRecord: a drop of branch
// custom (whose replay wrote to --dlq-table lake.custom_dlq) is killed
// after its commit: floe.dropping-dead-letters.custom records
// lake.custom_dlq. Before the drop is run again a new replay onto custom
// makes the branch again (its dead letters in lake.orders_custom_dlq).
// Dropping the new branch overwrites the record with its own tables and
// then removes it: lake.custom_dlq, with the old branch's dead letters, is
// named by nothing and no drop finds it again.
func TestReviewS61DropOfRecreatedBranchLosesCutShortRecord(t *testing.T) {
	cat, tbl, _ := deadLetterTables(t)
	custom := []string{"lake", "custom_dlq"}
	branchWithDeadLetters(t, cat, tbl, "custom", custom, 0)
	quiet := slog.New(slog.DiscardHandler)
	hc := &hookCatalog{Catalog: cat, dieAfterCommit: true}
	killed := openTestTable(t, hc, "lake.orders", snapshot.OpenOptions{})
	if _, err := killed.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{}); !errors.Is(err, errKilled) || !hc.dead {
		t.Fatalf("drop killed after its commit: %v (commit landed: %v)", err, hc.dead)
	}
	again := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{})
	if got := again.Iceberg().Properties()[snapshot.PropDroppingPrefix+"custom"]; got != "lake.custom_dlq" {
		t.Fatalf("record of the killed drop: %q", got)
	}
	// A new replay onto custom, before the drop is run again.
	branchWithDeadLetters(t, cat, again, "custom", snapshot.BranchDeadLetterName(again.Identifier(), "custom"), 10)
	if err := again.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := again.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{})
	if err != nil {
		t.Fatalf("drop of the new branch: %v", err)
	}
	t.Logf("drop of the new branch: %+v", got)
	if _, err := again.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{}); err != nil {
		t.Logf("drop run again: %v", err)
	}
	if dlqExists(t, cat, again, custom) {
		t.Errorf("lake.custom_dlq, the dead-letter table the killed drop recorded as still to drop, is left named by nothing (record now %q)",
			again.Iceberg().Properties()[snapshot.PropDroppingPrefix+"custom"])
	}
}

