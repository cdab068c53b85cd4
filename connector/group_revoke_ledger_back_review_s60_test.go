package connector_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestGroupRevocationCommittedAtLedgerBack (review s60): a revocation
// waits for the flush in flight (release), whose commit lands and then
// finds main moved back on another partition (errLedgerBack). release
// takes any error but pending dead letters for a commit that did not
// land: the rebalance is reported with Committed false, and the member
// logs that the revoked partitions' records were dropped for the next
// owner to read again, though they are in the table.
func TestGroupRevocationCommittedAtLedgerBack(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "back-revoke", "lake.back_revoke", "back-revoke"
	_, before := e.partition0Ahead(topic, table, 2) // p0 15, p1 10; before: p0 10
	// p0 15, p1 10; a publish holds main's writers, so that the member's
	// next flush is in flight when the group revokes its partitions.
	e.publishHold(table, time.Now().Add(time.Minute))
	var (
		mu      sync.Mutex
		revoked []connector.Rebalance
	)
	cfg := groupConfig(topic, group)
	cfg.FlushRecords, cfg.FlushInterval = 5, time.Minute
	cfg.OnRebalance = func(r connector.Rebalance) {
		if len(r.Revoked) > 0 {
			mu.Lock()
			revoked = append(revoked, r)
			mu.Unlock()
		}
	}
	m := e.startMemberMovedBack(table, before, cfg)
	defer func() {
		m.stop()
		<-m.done
	}()
	// A flush of p1's 5 records, held by the publish, and nothing more.
	e.Produce(records(topic, 1, 5, "b"))
	time.Sleep(time.Second)
	var joined atomic.Bool
	cfg2 := groupConfig(topic, group)
	cfg2.OnSession = func() { joined.Store(true) }
	m2 := e.startMember(table, cfg2)
	defer func() {
		m2.stop()
		<-m2.done
	}()
	for !joined.Load() {
		time.Sleep(50 * time.Millisecond)
	}
	// The revocation waits for the held flush (within the rebalance
	// timeout less a margin, 5 s here); the publish ends its hold.
	time.Sleep(time.Second)
	e.publishHold(table, time.Now().Add(-time.Second))
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(revoked)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(revoked) == 0 {
		t.Fatal("no partition was revoked from the first member")
	}
	if r := revoked[0]; !r.Committed {
		t.Errorf("revocation of %v reported as not committed (its records dropped for the next owner), though the flush it waited for landed: table p1 rows %d",
			r.Revoked, len(offsetsOf(t, e.Table(table), mapping.TopicPartition{Topic: topic, Partition: 1})))
	}
}
