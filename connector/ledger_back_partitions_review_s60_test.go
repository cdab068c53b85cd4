package connector_test

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestLedgerBackWithPartitionsAddedRestarts (review s60): a live session
// ended by partitions added to the topic (errPartitionsChanged) commits
// its last flush, and that flush's ledger check finds main moved back on
// a partition it did not carry (errLedgerBack). Each alone restarts the
// session; consume joins the two (withFailure), which Sink.run compares
// with == and takes for a failure: the live sink exits with "partitions
// were added to the topic / the table's ledger went back" instead of
// reading the moved-back offsets and the new partition.
func TestLedgerBackWithPartitionsAddedRestarts(t *testing.T) {
	e := newEnv(t)
	const topic, table = "back-parts", "lake.back_parts"
	p0 := mapping.TopicPartition{Topic: topic, Partition: 0}
	tbl, before := e.partition0Ahead(topic, table, 2) // p0 15, p1 10; before: p0 10
	// p0 15, p1 10, and p1 gets 5 more. As the live sink's session starts,
	// main is rolled back to before (p0 back to 10) and a partition is
	// added to the topic. The session reads p1's records (busy: never
	// idle for the ledger check) until its partition check ends it.
	e.Produce(records(topic, 1, 5, "b"))
	var once sync.Once
	started := make(chan struct{})
	stop := e.runLive(tbl, connector.Config{Topic: topic, FlushInterval: time.Minute, PartitionCheck: time.Millisecond,
		OnSession: func() {
			once.Do(func() {
				e.rollBack(table, before)
				if _, err := kadm.NewClient(e.Dial().Client()).CreatePartitions(e.Ctx, 1, topic); err != nil {
					t.Error(err)
				}
				close(started)
			})
		}})
	<-started
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(offsetsOf(t, e.Table(table), p0)) < 15 {
		time.Sleep(time.Second)
	}
	if _, err := stop(); err != nil {
		t.Fatalf("the live sink failed: %v", err)
	}
	if got := offsetsOf(t, e.Table(table), p0); len(got) != 15 {
		t.Errorf("partition 0 rows at offsets %v, want 0-14 read again after the rollback", got)
	}
}
