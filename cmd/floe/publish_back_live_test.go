package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
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
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
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
	want, _ := next()
	out := mustFloe(t, append([]string{"replay", "-b", brokers, "--topic", "orders", "--table", "lake.orders",
		"--branch", "rb", "--until", "0=10,1=10,2=10", "--publish"}, loc...)...)
	if !strings.Contains(out, "main went back") {
		t.Fatalf("the publish did not move main back:\n%s", out)
	}
	var got map[int32]int64
	ok := waitForOK(20*time.Second, func() bool {
		got, _ = next()
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	cancel()
	<-done
	if !ok {
		t.Errorf("20 s after the publish moved main back to 10 per partition, the live sink had not read the offsets again: table next offsets %v, want %v (the log's end; nothing new was produced)", got, want)
	}
}
