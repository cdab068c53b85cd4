package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestReplayInterruptedSaysHowToContinue (from a new-user run): a replay
// into a new table stopped by a signal after its first commit exited 2
// with "load table ...: context canceled", the layout line read with the
// cancelled context, instead of saying that running it again continues.
func TestReplayInterruptedSaysHowToContinue(t *testing.T) {
	st, _, _ := partitionedStack(t, "big", 1)
	produceRound(t, st.Brokers, "big", 1, 60000, map[int32]int64{})
	cfg := st.Catalog()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, _, err = floeCtx(ctx, "replay", "--brokers", strings.Join(st.Brokers, ","), "--topic", "big", "--table", "lake.big_r",
			"--flush-records", "100", "--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse)
		done <- err
	}()
	// Stopped once it has committed, as a user's Ctrl-C is.
	for !replayTableExists(t, st, "lake.big_r") || snapshotCount(t, st, "lake.big_r") < 2 {
		select {
		case err := <-done:
			t.Fatalf("the replay ended before it was stopped: %v\n%s", err, out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "replay interrupted: lake.big_r is consistent up to the next offsets above; run the same command again to continue") {
		t.Fatalf("interrupted replay: %v\n%s", err, out)
	}
}
