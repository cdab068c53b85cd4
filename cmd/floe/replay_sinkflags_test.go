package main

import (
	"strings"
	"testing"
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
