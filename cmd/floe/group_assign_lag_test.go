package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// portIn returns a loopback port of [lo, hi] that was free a moment ago.
func portIn(t *testing.T, lo, hi int) int {
	t.Helper()
	for p := lo; p <= hi; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			l.Close()
			return p
		}
	}
	t.Fatalf("no free port in %d-%d", lo, hi)
	return 0
}

// memberView reads a sink's /status.json: the partitions the group assigned
// to it, and the table's next offset and lag it shows for each partition.
func memberView(addr string) (assigned []int32, next, lag map[int32]int64) {
	resp, err := http.Get("http://" + addr + "/status.json")
	if err != nil {
		return nil, nil, nil
	}
	defer resp.Body.Close()
	var doc struct {
		Pipelines []struct {
			Assigned   []int32                  `json:"assigned"`
			Partitions []lookup.PartitionStatus `json:"partitions"`
		} `json:"pipelines"`
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil || len(doc.Pipelines) != 1 {
		return nil, nil, nil
	}
	next, lag = map[int32]int64{}, map[int32]int64{}
	for _, p := range doc.Pipelines[0].Partitions {
		if p.TableNext != nil {
			next[p.Partition] = *p.TableNext
		}
		if p.Lag != nil {
			lag[p.Partition] = *p.Lag
		}
	}
	return doc.Pipelines[0].Assigned, next, lag
}

// TestGroupMemberShowsAssignedPartitionsAtTheirPositions (from a new
// user): a member that joins a group is assigned partitions at the ledger's
// next offsets, which it logs ("partitions assigned by the group; each
// starts at the ledger's next offset ... positions=map[2:397695 3:432377]"),
// but its status page and floe_partition_next_offset / floe_partition_lag
// gauges keep the values of its last lag poll, taken before the member that
// gave the partitions up committed them on revocation: right after the
// rebalance the new owner showed lag 50132 and 54493 for partitions the
// table already held up to their end, until its next lag poll
// (--lag-interval, 15 s by default). The gauges poll "after each commit",
// but an assignment changes what the member knows as much as a commit does.
func TestGroupMemberShowsAssignedPartitionsAtTheirPositions(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	start := func(addr string) (context.CancelFunc, chan struct{}) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			// A long flush interval: the first member holds its records
			// until it gives partitions up; a long lag interval: only the
			// start and the commits poll.
			floeCtx(ctx, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--group", "g",
				"--metrics-addr", addr, "--lag-interval", "1h", "--flush-interval", "1h"}, loc...)...)
		}()
		waitHTTP(t, "http://"+addr+"/status.json")
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return stop, done
	}
	a := fmt.Sprintf("127.0.0.1:%d", portIn(t, 38600, 38649))
	start(a)
	waitFor(t, time.Minute, "the first member to own every partition", func() bool {
		got, _, _ := memberView(a)
		return len(got) == 3
	})
	time.Sleep(2 * time.Second) // it reads the 300 records, and holds them
	b := fmt.Sprintf("127.0.0.1:%d", portIn(t, 38650, 38699))
	start(b)
	var assigned []int32
	waitFor(t, time.Minute, "the second member to be assigned partitions", func() bool {
		assigned, _, _ = memberView(b)
		return len(assigned) > 0
	})
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "orders"}, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Summary(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	for tp, n := range l.Next() {
		want[tp.Partition] = n
	}
	var next, lag map[int32]int64
	ok := waitForOK(10*time.Second, func() bool {
		_, next, lag = memberView(b)
		for _, p := range assigned {
			if next[p] != want[p] || lag[p] != 0 {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Errorf("the new owner of partitions %v shows next offsets %v and lag %v 10 s after its assignment; the table's next offsets are %v (nothing left to sink)",
			assigned, next, lag, want)
	}
}
