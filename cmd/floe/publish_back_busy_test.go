package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// TestLiveBusySinkRereadsQuietPartitionAfterPublish (from a review): a
// replay published with --until below main's head on one partition only
// (orders/0) moves main back there, while the other partitions' ends are
// main's. docs/replay.md says a running sink reads those offsets again "at
// its next commit, or within 10 s when it is idle at the end of the log".
// A sink that keeps committing another partition (orders/1, busy) is never
// idle, and its commits, which do not touch orders/0, are not fenced
// (settle checks only the partitions a commit carries): orders/0 stays
// back, its offsets unsunk, for as long as it receives no record, however
// long the sink runs; retention may then delete them (a loss the sink
// stops on at its next session). The commit check knows each partition's
// next offset in the ledger (checkStart's known); a partition of the
// session that the ledger now holds below the session's position should end
// the session, as checkLedgerBack does when idle.
func TestLiveBusySinkRereadsQuietPartitionAfterPublish(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders",
		"--flush-interval", "200ms", "--lag-interval", "200ms"}, loc...)...)
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	next := func() (map[int32]int64, int64) {
		tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "orders"}, snapshot.OpenOptions{})
		if err != nil {
			return nil, 0
		}
		l, err := tbl.Summary(t.Context(), 0)
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
	waitFor(t, time.Minute, "the live sink to sink the 300 events", func() bool {
		_, total := next()
		return total == 300
	})
	before, _ := next()
	out := mustFloe(t, append([]string{"replay", "-b", brokers, "--topic", "orders", "--table", "lake.orders",
		"--branch", "rb", "--until", fmt.Sprintf("0=10,1=%d,2=%d", before[1], before[2]), "--publish"}, loc...)...)
	if !strings.Contains(out, "main went back") {
		t.Fatalf("the publish did not move main back:\n%s", out)
	}
	if got, _ := next(); got[0] != 10 || got[1] != before[1] {
		t.Fatalf("after the publish main is at %v, want orders/0 at 10 and the others at %v", got, before)
	}
	// orders/1 stays busy: a record every 20 ms.
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var produced sync.Map
	wg.Go(func() {
		for i := 0; pctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: "orders", Partition: 1, Key: []byte("k"), Value: fmt.Appendf(nil, `{"n":%d}`, i)}
			if localstack.Produce(pctx, st.Brokers, []*kgo.Record{r}) == nil {
				produced.Store(i, true)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	var got map[int32]int64
	ok := waitForOK(25*time.Second, func() bool {
		got, _ = next()
		return got[0] == before[0]
	})
	stop()
	wg.Wait()
	cancel()
	<-done
	if !ok {
		t.Errorf("25 s after the publish moved orders/0 back from %d to 10, with orders/1 busy, the live sink had not read orders/0 again: table next offsets %v (orders/0 received nothing new)", before[0], got)
	}
}
