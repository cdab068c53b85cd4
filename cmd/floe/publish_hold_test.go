package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
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
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders",
		"--flush-interval", "100ms"}, loc...)...)
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"lake", "orders"}
	total := func() int64 {
		tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{})
		if err != nil {
			return 0
		}
		l, err := tbl.Summary(t.Context(), 0)
		if err != nil {
			return 0
		}
		var n int64
		for _, next := range l.Next() {
			n += next
		}
		return n
	}
	waitFor(t, time.Minute, "the live sink to sink the 300 events", func() bool { return total() == 300 })
	mustFloe(t, append([]string{"replay", "-b", brokers, "--topic", "orders", "--table", "lake.orders", "--branch", "rb"}, loc...)...)

	// orders/1 stays busy: the sink commits every 100 ms.
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var produced atomic.Int64
	wg.Go(func() {
		for i := 0; pctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: "orders", Partition: 1, Key: []byte("k"), Value: fmt.Appendf(nil, `{"n":%d}`, i)}
			if localstack.Produce(pctx, st.Brokers, []*kgo.Record{r}) == nil {
				produced.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	br, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Branch: "rb"})
	if err != nil {
		t.Fatal(err)
	}
	checks := 0
	_, _, err = br.PublishChecked(t.Context(), "", func(context.Context, int64) error {
		checks++
		time.Sleep(time.Second) // a comparison slower than the sink's flushes
		return nil
	})
	stop()
	wg.Wait()
	if err != nil {
		cancel()
		<-done
		t.Fatalf("publish beside a live sink, after %d checks: %v", checks, err)
	}
	want := 300 + produced.Load()
	ok := waitForOK(time.Minute, func() bool { return total() == want })
	cancel()
	run := <-done
	if !ok {
		t.Fatalf("after the publish the table holds %d offsets, want %d; sink:\n%s", total(), want, run.errs)
	}
	if !strings.Contains(run.errs, "holding this commit: a replay is publishing branch rb") {
		t.Errorf("the sink did not say it held for the publish:\n%s", run.errs)
	}
	mustFloe(t, append([]string{"audit", "-b", brokers, "--table", "lake.orders"}, loc...)...)
}
