package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReplayBranchesSharingDeadLetterName: branches a_b and a-b would
// write their dead letters to one table, lake.orders_a_b_dlq, and dropping
// either dropped the other's dead letters. A replay onto a-b while a_b is
// a branch is refused, naming both and the fix; a branch named so by
// another tool (or an older floe) keeps the table when a_b is dropped.
func TestReplayBranchesSharingDeadLetterName(t *testing.T) {
	st, loc, brokers := dropRefStack(t)
	replay := func(branch string) []string {
		return slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json", "--branch", branch}, loc)
	}
	// Its commits are logged as the branch's, not as main's (from a
	// new-user run).
	if code, out, errs := floe(t, replay("a_b")...); code != exitOK || !regexp.MustCompile(`msg=committed .*table=lake.orders branch=a_b`).MatchString(errs) {
		t.Fatalf("replay onto a_b: exit %d\n%s%s", code, out, errs)
	}
	if !replayTableExists(t, st, "lake.orders_a_b_dlq") {
		t.Fatal("the replay created no dead-letter table of its branch")
	}
	code, out, errs := floe(t, replay("a-b")...)
	if code == 0 || !strings.Contains(errs, "branch a-b of lake.orders would write its dead letters to lake.orders_a_b_dlq, the dead-letter table of its branch a_b too") ||
		!strings.Contains(errs, "--dlq-table") {
		t.Fatalf("replay onto a-b beside a_b: exit %d\n%s%s", code, out, errs)
	}
	// Glue lowercases table names: A_B's would be a_b's there.
	if code, out, errs := floe(t, replay("A_B")...); code == 0 || !strings.Contains(errs, "the dead-letter table of its branch a_b too") {
		t.Fatalf("replay onto A_B beside a_b: exit %d\n%s%s", code, out, errs)
	}
	tbl := openTable(t, st.Catalog(), "lake.orders")
	if tbl.HasBranch("a-b") || tbl.HasBranch("A_B") {
		t.Fatal("a refused replay made its branch")
	}
	// With a table of its own the replay runs.
	mustFloe(t, append(replay("a-b"), "--dlq-table", "lake.orders_ab_dlq")...)

	if err := tbl.CreateEmptyBranch(t.Context(), "a.b"); err != nil {
		t.Fatal(err)
	}
	out = mustFloe(t, slices.Concat([]string{"drop", "--table", "lake.orders", "--branch", "a_b", "--yes"}, loc)...)
	if !replayTableExists(t, st, "lake.orders_a_b_dlq") {
		t.Fatalf("dropping a_b dropped the dead-letter table branch a.b writes to:\n%s", out)
	}
}
