package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestReplayPublishedBeforeNamesNewBranch (from a new-user run): the same
// replay --branch --publish run again once main has moved on says
// "published before" and names the fix for rebuilding again, a new
// --branch; when main moved by maintenance only (compaction), it says so.
// The new branch then publishes.
func TestReplayPublishedBeforeNamesNewBranch(t *testing.T) {
	st, loc := keyedStack(t, "lake.u")
	replay := slices.Concat([]string{"replay", "-b", st.Brokers[0], "-t", "u", "--table", "lake.u", "--publish"}, loc)
	rebuild := append(slices.Clone(replay), "--branch", "rebuild")
	mustFloe(t, rebuild...)
	const again = "; to rebuild again, replay onto a new branch (--branch rebuild-2)\n"
	const maintained = "(maintenance only, such as compaction: main holds no records past the branch's"

	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.u", "--compact"}, loc)...)
	out := mustFloe(t, rebuild...)
	if !strings.Contains(out, "published before: main (snapshot ") || !strings.Contains(out, maintained) || !strings.Contains(out, again) {
		t.Fatalf("again after a compaction of main:\n%s", out)
	}

	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{rec("u", 0, []byte("f"), []byte("f1"), 20)}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "-b", st.Brokers[0], "-t", "u", "--table", "lake.u", "--stop-at-end"}, loc)...)
	out = mustFloe(t, rebuild...)
	if !strings.Contains(out, "published before: main (snapshot ") || strings.Contains(out, "maintenance only") || !strings.Contains(out, again) {
		t.Fatalf("again after a sink into main:\n%s", out)
	}
	if out := mustFloe(t, append(replay, "--branch", "rebuild-2")...); !strings.Contains(out, "published: main moved from snapshot") {
		t.Fatalf("onto the new branch the message names:\n%s", out)
	}
}
