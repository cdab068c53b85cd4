package main

import (
	"slices"
	"strings"
	"testing"
)

// TestLookupsBelowPublishedReplayFrom (from a new user's run): an append
// table whose main was replaced by a replay from later offsets (--from,
// published with --publish-different). as-of at a position below the
// replay's start said the table held nothing then, and where said the
// offset was never sunk: main held its rows before the publish. Both say
// main's history no longer reaches there.
func TestLookupsBelowPublishedReplayFrom(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc)...)
	mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--from", "0=50,1=50,2=50",
		"--branch", "late", "--publish", "--publish-different"}, loc)...)
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", "0=20,1=20,2=20", "--rows"}, loc)...)
	if code != exitError || !strings.Contains(errs, "main's history no longer reaches back to that position: a replay published from branch late") {
		t.Errorf("as-of below the published replay's start: exit %d\n%s%s\nwant exit 2 saying main's history no longer reaches there", code, out, errs)
	}
	out = mustFloe(t, slices.Concat([]string{"where", "--table", "lake.orders", "--partition", "0", "--offset", "10"}, loc)...)
	if !strings.Contains(out, "is not in main's history: main holds orders/0 from offset 50 on since a replay was published onto it (branch late)") {
		t.Errorf("where below the published replay's start:\n%s", out)
	}
	// At or past the replay's start, the answers are as before.
	if out := mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", "0=60,1=60,2=60"}, loc)...); strings.Contains(out, "history") {
		t.Errorf("as-of past the replay's start:\n%s", out)
	}
}
