package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/snapshot"
)

// TestLiveSinkHoldsForPublish: a live floe sink that commits more often
// than a publish's check takes (--flush-interval 100ms on a busy
// partition) won every attempt of the publish, which gave up: the fix was
// to stop the sinks. The publish now asks main's writers to hold (a table
// property) once main moved under an attempt; the sink holds its next
// commit until the swap, the publish lands, and the sink, fenced by the
// published ledger, reads the records since the branch's end again: the
// table ends with every record once.
func TestLiveSinkHoldsForPublish(t *testing.T) {
	lo := startLiveOrders(t, 3*time.Minute, "--flush-interval", "100ms")
	mustFloe(t, append([]string{"replay", "-b", lo.brokers, "--topic", "orders", "--table", "lake.orders", "--branch", "rb"}, lo.loc...)...)

	// orders/1 stays busy: the sink commits every 100 ms.
	stopProducing := lo.produceEvery(1, 10*time.Millisecond)
	br, err := snapshot.Open(t.Context(), lo.cat, table.Identifier{"lake", "orders"}, snapshot.OpenOptions{Branch: "rb"})
	if err != nil {
		t.Fatal(err)
	}
	checks := 0
	_, _, err = br.PublishChecked(t.Context(), "", func(context.Context, int64) error {
		checks++
		time.Sleep(time.Second) // a comparison slower than the sink's flushes
		return nil
	})
	produced := stopProducing()
	if err != nil {
		lo.stop()
		t.Fatalf("publish beside a live sink, after %d checks: %v", checks, err)
	}
	want := 300 + produced
	ok := waitForOK(time.Minute, func() bool { _, total := lo.next(); return total == want })
	run := lo.stop()
	if !ok {
		_, total := lo.next()
		t.Fatalf("after the publish the table holds %d offsets, want %d; sink:\n%s", total, want, run.errs)
	}
	if !strings.Contains(run.errs, "holding this commit: a replay is publishing branch rb") {
		t.Errorf("the sink did not say it held for the publish:\n%s", run.errs)
	}
	mustFloe(t, append([]string{"audit", "-b", lo.brokers, "--table", "lake.orders"}, lo.loc...)...)
}
