package main

import (
	"slices"
	"strings"
	"testing"
)

// TestReplayTagMainRerunAfterPublish (from a review): replay
// --publish --tag-main NAME published, tagging main's previous head NAME;
// a sink on main committed since. The same command run again (a script's
// retry, a job rerun after its result was lost) must say the branch was
// published before, exit 0, as it does without --tag-main (checkTagMain
// lets a rerun through for that), not refuse the tag its first run made
// (PublishChecked checked the tag's name before it looked whether the
// branch was published).
func TestReplayTagMainRerunAfterPublish(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	sinkMain := func() string {
		return mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc)...)
	}
	sinkMain()
	replay := func(branch string, extra ...string) (int, string, string) {
		return floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders",
			"--from", "0=50,1=50,2=50", "--until", "0=60,1=60,2=60", "--branch", branch, "--publish", "--publish-different"}, extra, loc)...)
	}
	for _, c := range []struct {
		branch string
		extra  []string
	}{{"plain", nil}, {"tagged", []string{"--tag-main", "before-tagged"}}} {
		code, out, errs := replay(c.branch, c.extra...)
		if code != 0 || !strings.Contains(out, "published: main moved") {
			t.Fatalf("%s: first replay: exit %d\n%s%s", c.branch, code, out, errs)
		}
		count := map[int32]int64{}
		produceRound(t, st.Brokers, "orders", 3, 30, count)
		if out := sinkMain(); !strings.Contains(out, " rows in ") {
			t.Fatalf("%s: sink on main after the publish: %s", c.branch, out)
		}
		code, out, errs = replay(c.branch, c.extra...)
		if code != 0 {
			t.Errorf("%s: the same replay run again after its publish, main advanced by a sink since: exit %d, want 0 (published before)\nstdout:\n%s\nstderr:\n%s", c.branch, code, out, errs)
		}
	}
}
