package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
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

// TestReviewS61DropAgainJSONSaysNothingDropped: a published branch whose
// drop kept its dead-letter table (main rolled back below its head) is
// dropped again with --json --yes: nothing is dropped ("was dropped
// before: nothing of it is left to drop"), but the line said
// "dropped":true, which floe drop --help gives as "whether anything was".
func TestReviewS61DropAgainJSONSaysNothingDropped(t *testing.T) {
	st, loc, brokers := dropRefStack(t)
	mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json",
		"--branch", "rebuild", "--publish", "--tag-main", "pre"}, loc)...)
	tbl := openTable(t, st.Catalog(), "lake.orders")
	refs := maps.Collect(tbl.Iceberg().Metadata().Refs())
	published, pre := refs["main"].SnapshotID, refs["pre"].SnapshotID
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cat.CommitTable(t.Context(), tbl.Identifier(), []table.Requirement{table.AssertRefSnapshotID("main", &published)},
		[]table.Update{table.NewSetSnapshotRefUpdate("main", pre, table.BranchRef, 0, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	drop := slices.Concat([]string{"drop", "--table", "lake.orders", "--branch", "rebuild", "--yes"}, loc)
	mustFloe(t, drop...)
	code, out, errs := floe(t, append(drop, "--json")...)
	if code != exitOK || !strings.Contains(out, `"gone":true`) || !strings.Contains(out, `"dead_letter_tables":[]`) {
		t.Fatalf("drop run again: exit %d\n%s%s", code, out, errs)
	}
	if strings.Contains(out, `"dropped":true`) {
		t.Errorf("drop run again, which dropped nothing, says it did:\n%s", out)
	}
}
