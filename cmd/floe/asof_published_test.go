package main

import (
	"encoding/json"
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
	// Past the replay's start, the answer is the replay's rows, and says
	// that it lacks those below the start, which main held before (review
	// s67: it said nothing of them).
	out = mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", "0=60,1=60,2=60"}, loc)...)
	if !strings.Contains(out, "lacks orders/0 below 50, orders/1 below 50, orders/2 below 50: main's history begins with the replay published from branch late, which began there") {
		t.Errorf("as-of past the replay's start does not say it lacks the rows below it:\n%s", out)
	}
	out = mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", "0=60,1=60,2=60", "--json"}, loc)...)
	var r struct {
		Published struct {
			Branch string
			Starts []struct {
				Partition int32
				Offset    int64
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Published.Branch != "late" || len(r.Published.Starts) != 3 || r.Published.Starts[2].Partition != 2 || r.Published.Starts[2].Offset != 50 {
		t.Errorf("as-of --json past the replay's start: published %+v (%v), want branch late and each partition from 50:\n%s", r.Published, err, out)
	}
}
