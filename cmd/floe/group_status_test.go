package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// groupMember is a `floe sink --group g` of sinkStack's orders topic into
// lake.orders, serving its metrics and status on addr.
type groupMember struct {
	addr   string
	out    string
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// startGroupMembers starts n group members, each once the one before
// serves its status, so they join the group in order; they stop with the
// test if it does not stop them.
func startGroupMembers(t *testing.T, brokers string, loc []string, n int) []*groupMember {
	t.Helper()
	members := make([]*groupMember, n)
	for i := range members {
		ctx, cancel := context.WithCancel(t.Context())
		m := &groupMember{addr: fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t)), cancel: cancel, done: make(chan struct{})}
		members[i] = m
		t.Cleanup(m.stop)
		go func() {
			defer close(m.done)
			m.out, _, m.err = floeCtx(ctx, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--group", "g",
				"--metrics-addr", m.addr, "--lag-interval", "200ms", "--flush-interval", "300ms"}, loc...)...)
		}()
		waitHTTP(t, "http://"+m.addr+"/status.json")
	}
	return members
}

// stop stops m's sink and waits for it to exit.
func (m *groupMember) stop() {
	m.cancel()
	<-m.done
}

// TestGroupMembersShowTheTablesOffsets (from a new-user run): each member
// of a consumer group showed, on its status page and lag gauges, the
// partitions other members own as of its own start, so their lag grew
// with every record the others committed (an alert on
// max(floe_partition_lag) would fire for good), and its final summary
// gave their next offsets as stale. A member now reads the table's ledger
// before each lag poll, and its summary gives the table's offsets (its
// own partitions' apart from the others').
func TestGroupMembersShowTheTablesOffsets(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	members := startGroupMembers(t, brokers, loc, 2)
	// Records for every partition, after both members started: each
	// member commits only those it owns.
	for p := range int32(3) {
		if err := localstack.Produce(t.Context(), st.Brokers, eventsTo("orders", p, 30)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[int32]int64{}
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the table to take every record", func() bool {
		// The members may not have made the table yet on a busy machine.
		tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "orders"}, snapshot.OpenOptions{})
		if err != nil {
			return false
		}
		l, err := tbl.Summary(t.Context(), 0)
		if err != nil {
			return false
		}
		total := int64(0)
		for tp, n := range l.Next() {
			want[tp.Partition] = n
			total += n
		}
		return total == 390
	})
	for i, m := range members {
		var got map[int32]int64
		ok := waitForOK(time.Minute, func() bool {
			got = memberNext(m.addr)
			return fmt.Sprint(got) == fmt.Sprint(want)
		})
		if !ok {
			t.Errorf("member %d's status page: next offsets %v; want the table's, %v", i, got, want)
		}
	}
	for _, m := range members {
		m.stop()
	}
	for i, m := range members {
		if m.err != nil {
			t.Fatalf("member %d: %v", i, m.err)
		}
		// Its own partitions and the others', on two lines.
		own, others := memberSummaryNext(m.out)
		maps.Copy(own, others)
		if fmt.Sprint(own) != fmt.Sprint(want) {
			t.Errorf("member %d's summary %q; want the table's next offsets %v", i, m.out, want)
		}
	}
}

// memberNext reads the table's next offsets a sink's status page shows.
func memberNext(addr string) map[int32]int64 {
	resp, err := http.Get("http://" + addr + "/status.json")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var doc struct {
		Pipelines []struct {
			Partitions []lookup.PartitionStatus `json:"partitions"`
		} `json:"pipelines"`
	}
	if json.NewDecoder(resp.Body).Decode(&doc) != nil || len(doc.Pipelines) != 1 {
		return nil
	}
	out := map[int32]int64{}
	for _, p := range doc.Pipelines[0].Partitions {
		if p.TableNext != nil {
			out[p.Partition] = *p.TableNext
		}
	}
	return out
}

// waitForOK polls cond until it holds or d passes, and reports which.
func waitForOK(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
