package snapshot_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

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

// TestReviewS61DropOfCollidingBranchKeepsRolledBackPublishedDeadLetters:
// branch a-b is published (its commits' dead letters in
// lake.orders_a_b_dlq) and main is rolled back below it by another
// engine; floe drop --branch a-b keeps lake.orders_a_b_dlq (the published
// head is a snapshot of the table: the rollback may be undone). A replay
// onto a_b is then allowed (checkBranchDeadLetterName looks at live
// branches only) and writes into the same table; floe drop --branch a_b
// (never published) drops it with its files: undoing the rollback finds
// a-b's dead letters gone.
func TestReviewS61DropOfCollidingBranchKeepsRolledBackPublishedDeadLetters(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	shared := snapshot.BranchDeadLetterName(tbl.Identifier(), "a-b")
	head := publishRolledBack(t, cat, tbl, "a-b", shared)
	quiet := slog.New(slog.DiscardHandler)
	got, err := tbl.DropRef(t.Context(), quiet, "a-b", snapshot.DropRefOptions{})
	if err != nil || len(got.DeadLetterTables) != 0 {
		t.Fatalf("drop of published a-b under a rolled-back main: %+v, %v; want its dead-letter table kept", got, err)
	}
	if !dlqExists(t, cat, tbl, shared) {
		t.Fatal("the drop of a-b dropped its dead-letter table")
	}
	// What holds it, and only that (from a user).
	if why := got.KeptBecause[strings.Join(shared, ".")]; len(why) != 1 || !strings.HasPrefix(why[0], "branch a-b was published and main's history from its publish") {
		t.Errorf("drop of published a-b under a rolled-back main keeps its dead-letter table because %q; want its published line alone", why)
	}
	// A replay onto a_b: a-b is no branch now, nothing refuses it.
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	branchWithDeadLetters(t, cat, tbl, "a_b", snapshot.BranchDeadLetterName(tbl.Identifier(), "a_b"), 20)
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err = tbl.DropRef(t.Context(), quiet, "a_b", snapshot.DropRefOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !dlqExists(t, cat, tbl, shared) {
		t.Fatalf("the drop of a_b dropped %s (%+v), which holds the dead letters of a-b's published commits: main set back to a-b's head (%d, still a snapshot of the table) finds them gone",
			strings.Join(shared, "."), got, head)
	}
	if why := got.KeptBecause[strings.Join(shared, ".")]; len(why) != 1 || why[0] != fmt.Sprintf("the ledger of snapshot %d names it: main's history that the publish of branch a-b began, which a rollback left and main may be set back to", head) {
		t.Errorf("drop of a_b keeps %s because %q; want a-b's published line alone", strings.Join(shared, "."), why)
	}
}

// TestReviewS61SecondDropOfPublishedBranchForgetsItsTable: a published
// branch dropped while main is rolled back below it keeps its dead-letter
// table, and its record floe.dead-letter-tables.TABLE stays with it. Once
// maintenance expired the rolled-back line, the drop run again drops the
// table (the Gone path, which commits nothing) and leaves the record:
// DeadLetterTableNames (floe register's dead_letter_tables_missing) names
// a table the drop dropped on purpose.
func TestReviewS61SecondDropOfPublishedBranchForgetsItsTable(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	own := snapshot.BranchDeadLetterName(tbl.Identifier(), "rebuild")
	head := publishRolledBack(t, cat, tbl, "rebuild", own)
	quiet := slog.New(slog.DiscardHandler)
	if got, err := tbl.DropRef(t.Context(), quiet, "rebuild", snapshot.DropRefOptions{}); err != nil || len(got.KeptDeadLetterTables) != 1 {
		t.Fatalf("first drop: %+v, %v; want its table kept", got, err)
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if tbl.Iceberg().Metadata().SnapshotByID(head) != nil {
		t.Fatalf("maintain kept the published head %d", head)
	}
	got, err := tbl.DropRef(t.Context(), quiet, "rebuild", snapshot.DropRefOptions{})
	if err != nil || !got.Gone || len(got.DeadLetterTables) != 1 {
		t.Fatalf("drop run again: %+v, %v; want the table dropped", got, err)
	}
	if dlqExists(t, cat, tbl, own) {
		t.Fatal("the table is still there")
	}
	names, err := tbl.DeadLetterTableNames()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, strings.Join(own, ".")) {
		t.Errorf("dead-letter table names after the drop dropped %s: %v (property %s stays)", strings.Join(own, "."), names, snapshot.PropDeadLetterTablePrefix+strings.Join(own, "."))
	}
}

// publishRolledBack replays onto branch of tbl a commit with a dead letter
// in dlq, publishes it, and rolls main back to its head before, as
// another engine does; it returns the published head.
func publishRolledBack(t *testing.T, cat icecat.Catalog, tbl *snapshot.Table, branch string, dlq table.Identifier) int64 {
	t.Helper()
	pre := tbl.Head().SnapshotID
	br := branchWithDeadLetters(t, cat, tbl, branch, dlq, 0)
	if _, _, err := br.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	head := tbl.Head().SnapshotID
	setMain(t, tbl, pre)
	return head
}

// TestDropRefLeavesAnotherDropsCutShortRecord: a drop of branch custom
// (whose replay wrote to lake.custom_dlq) commits, and before it ends a
// new replay makes custom again (its dead letters in lake.custom2_dlq)
// and a drop of that branch is killed after its commit, which recorded
// both tables (floe.dropping-dead-letters.custom). The first drop's end
// must leave that record, which is no longer the one it wrote: it removed
// it, and lake.custom2_dlq was named by nothing, dropped by no drop run
// again.
func TestDropRefLeavesAnotherDropsCutShortRecord(t *testing.T) {
	cat, tbl, _ := deadLetterTables(t)
	custom, custom2 := []string{"lake", "custom_dlq"}, []string{"lake", "custom2_dlq"}
	branchWithDeadLetters(t, cat, tbl, "custom", custom, 0)
	quiet := slog.New(slog.DiscardHandler)
	key := snapshot.PropDroppingPrefix + "custom"
	var recorded string
	hc := &hookCatalog{Catalog: cat}
	// The first drop's commit lands; the rest happens before its next load.
	hc.beforeCommit = func() {
		hc.beforeLoad = func() {
			other := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{})
			branchWithDeadLetters(t, cat, other, "custom", custom2, 10)
			killed := openTestTable(t, &hookCatalog{Catalog: cat, dieAfterCommit: true}, "lake.orders", snapshot.OpenOptions{})
			if _, err := killed.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{}); !errors.Is(err, errKilled) {
				t.Fatalf("second drop killed after its commit: %v", err)
			}
			recorded = openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{}).Iceberg().Properties()[key]
		}
	}
	first := openTestTable(t, hc, "lake.orders", snapshot.OpenOptions{})
	if _, err := first.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{}); err != nil {
		t.Fatalf("first drop: %v", err)
	}
	if !strings.Contains(recorded, "lake.custom2_dlq") {
		t.Fatalf("the killed drop recorded %q: the test needs lake.custom2_dlq in it", recorded)
	}
	again := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{})
	if got := again.Iceberg().Properties()[key]; got != recorded {
		t.Errorf("after the first drop ended, %s is %q, want the killed drop's %q", key, got, recorded)
	}
	if _, err := again.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{}); err != nil {
		t.Logf("drop run again: %v", err)
	}
	if dlqExists(t, cat, again, custom2) {
		t.Errorf("lake.custom2_dlq, which the killed drop recorded as still to drop, is left after the drop was run again")
	}
	if err := again.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, ok := again.Iceberg().Properties()[key]; ok {
		t.Errorf("the drop run again left %s = %q", key, got)
	}
}
