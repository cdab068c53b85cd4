package main

import (
	"slices"
	"testing"
)

// TestReviewS61ReplayContinuesBranchSharingDeadLetterName: branches a_b
// and a-b both exist, as an older floe allowed (its interrupted replay
// onto a-b made the branch). Running that replay again to continue it,
// as its output says, is refused since 9be03c5 ("would write its dead
// letters to lake.orders_a_b_dlq, the dead-letter table of its branch a_b
// too"; hint: "replay onto another --branch"), though the branch exists
// and already shares the table, and the drop now keeps it for the other
// (refDeadLetterTables). The check is for a branch the replay makes.
func TestReviewS61ReplayContinuesBranchSharingDeadLetterName(t *testing.T) {
	st, loc, brokers := dropRefStack(t)
	replay := func(branch string) []string {
		return slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json", "--branch", branch}, loc)
	}
	mustFloe(t, replay("a_b")...)
	// An older floe's replay onto a-b, interrupted before its first commit.
	if err := openTable(t, st.Catalog(), "lake.orders").CreateEmptyBranch(t.Context(), "a-b"); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := floe(t, replay("a-b")...); code != exitOK {
		t.Errorf("replay onto the existing branch a-b run again to continue it: exit %d\n%s%s", code, out, errs)
	}
}
