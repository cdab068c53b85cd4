package main

import (
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
)

// A complete replay run again after the log grew says it is complete and
// writes nothing: --until end is the end offsets when the replay started.
// It says how to go further, with a time or offsets (a new user, told to
// "pass --until", passed --until end, which keeps the recorded end).
func TestReplayCommandRunAgainAfterTheLogGrew(t *testing.T) {
	st, loc := replayStack(t)
	ordersWithTransactions(t, st)
	brokers := strings.Join(st.Brokers, ",")
	args := append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.rebuilt"}, loc...)
	if out := mustFloe(t, args...); !strings.Contains(out, "replayed 412 rows") {
		t.Fatalf("first run:\n%s", out)
	}
	head := openFloeTable(t, st, "lake.rebuilt").Head().SnapshotID
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 3, 30, time.Now(), 9)); err != nil {
		t.Fatal(err)
	}
	for _, again := range [][]string{args, append(args, "--until", "end")} {
		out := mustFloe(t, again...)
		for _, want := range []string{"already holds this whole replay", "end offsets recorded when this replay started", "replayed 0 rows",
			"--until end keeps this end: pass --until TIME or --until OFFSETS to go further"} {
			if !strings.Contains(out, want) {
				t.Errorf("run again %v lacks %q:\n%s", again[len(args):], want, out)
			}
		}
	}
	if got := openFloeTable(t, st, "lake.rebuilt").Head().SnapshotID; got != head {
		t.Errorf("second run moved the head from %d to %d", head, got)
	}
}
