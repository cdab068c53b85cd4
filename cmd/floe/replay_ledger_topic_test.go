package main

import (
	"slices"
	"strings"
	"testing"
)

// TestReplayBranchTakesTheLedgersTopic (a production user's report):
// floe replay --branch onto an existing table required --topic though the
// table's ledger names it. With one topic in the ledger the replay takes
// it and says so; with several it is refused naming them.
func TestReplayBranchTakesTheLedgersTopic(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc)...)
	code, out, errs := floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--table", "lake.orders", "--branch", "rebuild"}, loc)...)
	if code != 0 || !strings.Contains(out, "topic orders: the one topic of lake.orders's ledger (no --topic given)") {
		t.Fatalf("replay --branch without --topic onto a table of one topic: exit %d\n%s%s\nwant the replay of orders, saying so", code, out, errs)
	}
	if !strings.Contains(mustFloe(t, slices.Concat([]string{"status", "--table", "lake.orders"}, loc)...), "rebuild") {
		t.Errorf("the replay made no branch rebuild")
	}

	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.two", "--stop-at-end"}, loc)...)
	produceKeyed(t, st, "more")
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "more", "--table", "lake.two", "--stop-at-end"}, loc)...)
	code, out, errs = floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--table", "lake.two", "--branch", "rebuild"}, loc)...)
	if code != exitError || !strings.Contains(errs, "lake.two's ledger holds topics more, orders; name the one to replay, e.g. --topic more") {
		t.Errorf("replay --branch without --topic onto a table of two topics: exit %d\n%s%s\nwant exit 2 naming both", code, out, errs)
	}
	code, _, errs = floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--table", "lake.neworders"}, loc)...)
	if code != exitError || !strings.Contains(errs, "missing --topic NAME") {
		t.Errorf("replay into a new table without --topic: exit %d\n%s\nwant --topic asked for", code, errs)
	}
}
