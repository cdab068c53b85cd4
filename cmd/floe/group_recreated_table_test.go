package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestGroupMemberOfRecreatedTableNamesTheDrop (from a review): a table
// dropped (floe drop --yes) while a member of its group still runs, and a
// sink started again under the same name, in the same catalog: the new
// member creates the table anew (another UUID) and finds the old member,
// which has not noticed the drop yet, in its group. It stopped saying the
// other member's table was "the same name in another catalog" only, though
// every member had the same --catalog: the other member sinks a table
// that no longer exists (and stops by itself at its next commit). The
// refusal names both causes, the drop too.
func TestGroupMemberOfRecreatedTableNamesTheDrop(t *testing.T) {
	st := ordersStack(t)
	_, cat := localCatalog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	args := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--group", "shared",
		"--session-timeout", "6s", "--rebalance-timeout", "10s", "--retry-for", "0s", "--flush-interval", "200ms"}, cat...)
	first := liveFloe(ctx, args...)
	defer func() {
		cancel()
		<-first
	}()
	waitFor(t, 30*time.Second, "the first member's rows", func() bool {
		code, out, _ := floe(t, append([]string{"files", "--table", "lake.orders"}, cat[:2]...)...)
		return code == 0 && strings.Contains(out, ".parquet")
	})
	mustFloe(t, append([]string{"drop", "--table", "lake.orders", "--yes"}, cat[:2]...)...)
	sctx, scancel := context.WithTimeout(ctx, 8*time.Second)
	defer scancel()
	_, errs, err := floeCtx(sctx, args...)
	if err == nil {
		return
	}
	if msg := withFlags(err); strings.Contains(msg, "consumer group shared has a member") && !strings.Contains(msg, "dropped and created again") {
		t.Errorf("a member started after the table was dropped, in the same catalog as the member still running: %s\n%s", msg, lastLines(errs, 5))
	}
}
