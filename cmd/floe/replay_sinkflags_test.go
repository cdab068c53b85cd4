package main

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/localstack"
)

// A bad --on-data-loss is refused before the replay writes anything: not
// its new table, not its branch.
func TestReplayCommandBadOnDataLossWritesNothing(t *testing.T) {
	st, loc := replayStack(t)
	ordersWithTransactions(t, st)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)

	code, _, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.bad",
		"--on-data-loss", "bogus"}, loc...)...)
	if code != exitError || !strings.Contains(errs, `--on-data-loss "bogus"`) {
		t.Errorf("exit %d, stderr %q; want exit %d naming --on-data-loss \"bogus\"", code, errs, exitError)
	}
	if replayTableExists(t, st, "lake.bad") {
		t.Fatal("the refused replay created its table")
	}
	code, _, errs = floe(t, append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders",
		"--branch", "rebuild", "--on-data-loss", "bogus"}, loc...)...)
	if code != exitError || !strings.Contains(errs, `--on-data-loss "bogus"`) {
		t.Errorf("branch: exit %d, stderr %q; want exit %d naming --on-data-loss \"bogus\"", code, errs, exitError)
	}
	if openFloeTable(t, st, "lake.orders").HasBranch("rebuild") {
		t.Fatal("the refused replay created its branch")
	}
}

// TestReplayOtherTopicOntoBranchRefused (from a new-user run): a replay of
// a topic that the table's main branch does not hold, onto a branch of
// it, ran to the end, and only its --publish was refused (saying main's
// offsets were missing from the branch). A published branch replaces
// main, so it is refused at once, naming main's topics, and no branch is
// made.
func TestReplayOtherTopicOntoBranchRefused(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.r3", "--stop-at-end"}, loc...)...)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "typed", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "typed", 1, 10, map[int32]int64{})
	code, _, errs := floe(t, append([]string{"replay", "--brokers", st.Brokers[0], "--topic", "typed", "--table", "lake.r3", "--branch", "oops", "--publish"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "replay topic typed onto branch oops of lake.r3, whose main branch holds topic orders") {
		t.Errorf("exit %d, %q", code, errs)
	}
	if openTable(t, st.Catalog(), "lake.r3").HasBranch("oops") {
		t.Error("the refused replay made branch oops")
	}
}
