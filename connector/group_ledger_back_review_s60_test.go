package connector_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/floe-dev/floe/mapping"
)

// TestGroupLedgerBackInCallbackIsNoFailure (review s60): a group member's
// commit whose ledger check finds main moved back (errLedgerBack) can be
// taken by a rebalance callback rather than the loop: adopt (a partition
// assigned while the commit was in flight) or release (a revocation)
// waits for the flush in flight and records its error for the loop
// (groupMember.fail). The loop's poll returns it as the session's failure,
// and consume makes its last flush: that commit's own check finds the
// same partition back, and withFailure joins the two errLedgerBack, which
// Sink.run compares with == and takes for a failure. The member exits
// with "the table's ledger went back" twice instead of reading the
// moved-back offsets again. Here a publish's hold keeps the commit in
// flight while a partition added to the topic is assigned, so that adopt
// takes its outcome.
func TestGroupLedgerBackInCallbackIsNoFailure(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "back-group", "lake.back_group", "back-group"
	p0 := mapping.TopicPartition{Topic: topic, Partition: 0}
	_, before := e.partition0Ahead(topic, table, 2) // p0 15, p1 10; before: p0 10
	// p0 15, p1 10. A publish asks main's writers to hold: the member
	// learns it as it takes its partitions on.
	e.publishHold(table, time.Now().Add(time.Minute))
	var added atomic.Bool
	reassigned := make(chan struct{}, 1)
	cfg := groupConfig(topic, group)
	cfg.FlushRecords, cfg.FlushInterval, cfg.PartitionCheck = 5, time.Minute, 200*time.Millisecond
	cfg.OnSession = func() {
		if added.Load() {
			select {
			case reassigned <- struct{}{}:
			default:
			}
		}
	}
	// Once the member took p0 on at 15, main goes back to before there
	// (p1 stays at 10, where the member is).
	m := e.startMemberMovedBack(table, before, cfg)
	defer func() {
		m.stop()
		<-m.done
	}()
	// A flush of p1's 5 records, held by the publish; then 2 more records,
	// short of the next flush.
	e.Produce(records(topic, 1, 5, "b"))
	time.Sleep(time.Second)
	e.Produce(records(topic, 1, 2, "c"))
	time.Sleep(500 * time.Millisecond)
	added.Store(true)
	if _, err := kadm.NewClient(e.Dial().Client()).CreatePartitions(e.Ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reassigned:
	case <-time.After(30 * time.Second):
		t.Fatal("the member was not assigned the added partition")
	}
	// Taking the new partition on waits for the held flush; the publish
	// ends its hold (as a publish giving up does).
	time.Sleep(time.Second)
	e.publishHold(table, time.Now().Add(-time.Second))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(offsetsOf(t, e.Table(table), p0)) < 15 {
		select {
		case <-m.done:
			t.Fatalf("the member stopped: %v", m.err)
		case <-time.After(500 * time.Millisecond):
		}
	}
	m.stop()
	<-m.done
	if m.err != nil {
		t.Fatalf("the member failed: %v", m.err)
	}
	if got := offsetsOf(t, e.Table(table), p0); len(got) != 15 {
		t.Errorf("partition 0 rows at offsets %v, want 0-14 read again after main went back", got)
	}
}
