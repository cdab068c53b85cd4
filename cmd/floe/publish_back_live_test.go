package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// TestLiveSinkRereadsAfterPublishMovedMainBack (from a new user): a
// replay published with --until below main's head moves main back ("main
// went back on orders/0 from offset 1551 to 1000: the next floe sink session
// reads those offsets again"). A live sink of the table, idle at the end of
// a quiet topic, does not notice: it keeps its own position (1551) and reads
// nothing again until a new record arrives and its commit is fenced, so the
// table lags by the offsets the publish took back for as long as the topic
// stays quiet (551 offsets for 30 s and more on the local stack; floe status
// and the audit show them as lag). The sink reads the ledger for its lag
// polls; main going back under it should start a new session from the
// ledger, as a fence does, without waiting for a record.
func TestLiveSinkRereadsAfterPublishMovedMainBack(t *testing.T) {
	lo := startLiveOrders(t, 2*time.Minute, "--flush-interval", "200ms", "--lag-interval", "200ms")
	want, _ := lo.next()
	out := mustFloe(t, append([]string{"replay", "-b", lo.brokers, "--topic", "orders", "--table", "lake.orders",
		"--branch", "rb", "--until", "0=10,1=10,2=10", "--publish"}, lo.loc...)...)
	if !strings.Contains(out, "main went back") {
		t.Fatalf("the publish did not move main back:\n%s", out)
	}
	var got map[int32]int64
	ok := waitForOK(20*time.Second, func() bool {
		got, _ = lo.next()
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	lo.stop()
	if !ok {
		t.Errorf("20 s after the publish moved main back to 10 per partition, the live sink had not read the offsets again: table next offsets %v, want %v (the log's end; nothing new was produced)", got, want)
	}
}

// liveOrders is a live floe sink of sinkStack's topic orders (3
// partitions, 300 events) into lake.orders.
type liveOrders struct {
	st      *localstack.Stack
	loc     []string
	brokers string
	// ctx is the sink's; read the test's, for reads after the sink stopped.
	ctx, read context.Context
	cancel    context.CancelFunc
	done      <-chan floeRun
	cat       icecat.Catalog
}

// startLiveOrders starts a live sink of orders with the extra sink args,
// for at most timeout, and waits until it has sunk the 300 events.
func startLiveOrders(t *testing.T, timeout time.Duration, args ...string) *liveOrders {
	t.Helper()
	st, loc := sinkStack(t)
	lo := &liveOrders{st: st, loc: loc, brokers: strings.Join(st.Brokers, ","), read: t.Context()}
	lo.ctx, lo.cancel = context.WithTimeout(t.Context(), timeout)
	t.Cleanup(lo.cancel)
	lo.done = liveFloe(lo.ctx, append(append([]string{"sink", "-b", lo.brokers, "-t", "orders", "--table", "lake.orders"}, args...), loc...)...)
	var err error
	if lo.cat, err = catalog.Open(t.Context(), st.Catalog()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the live sink to sink the 300 events", func() bool {
		_, total := lo.next()
		return total == 300
	})
	return lo
}

// next returns main's next offset of each partition, and their sum (0
// when the table cannot be read).
func (lo *liveOrders) next() (map[int32]int64, int64) {
	tbl, err := snapshot.Open(lo.read, lo.cat, table.Identifier{"lake", "orders"}, snapshot.OpenOptions{})
	if err != nil {
		return nil, 0
	}
	l, err := tbl.Summary(lo.read, 0)
	if err != nil {
		return nil, 0
	}
	out, total := map[int32]int64{}, int64(0)
	for tp, n := range l.Next() {
		out[tp.Partition] = n
		total += n
	}
	return out, total
}

// stop stops the sink and returns its run.
func (lo *liveOrders) stop() floeRun {
	lo.cancel()
	return <-lo.done
}

// produceEvery produces a record into partition p of orders every d until
// the returned stop is called, which returns how many were produced.
func (lo *liveOrders) produceEvery(p int32, d time.Duration) (stop func() int64) {
	ctx, cancel := context.WithCancel(lo.ctx)
	var produced atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: "orders", Partition: p, Key: []byte("k"), Value: fmt.Appendf(nil, `{"n":%d}`, i)}
			if localstack.Produce(ctx, lo.st.Brokers, []*kgo.Record{r}) == nil {
				produced.Add(1)
			}
			time.Sleep(d)
		}
	})
	return func() int64 {
		cancel()
		wg.Wait()
		return produced.Load()
	}
}
