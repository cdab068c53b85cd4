package connector_test

import (
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestLedgerBackAtLastFlushIsNoFailure (from a review): the commit
// goroutine now returns errLedgerBack when, after its commit, the ledger
// ends below the session on a partition the flush did not carry. Sink.run
// restarts (or, interrupted, stops cleanly) only on err == errLedgerBack,
// but the session's last flush (at an interrupt, or a bounded run's end)
// reaches it through errors.Join(failure, err) in consume, which is never
// == errLedgerBack: an interrupted sink whose last commit is in exits with
// "the table's ledger went back" as its failure.
func TestLedgerBackAtLastFlushIsNoFailure(t *testing.T) {
	e := newEnv(t)
	const topic, table = "back-last", "lake.back_last"
	p1 := mapping.TopicPartition{Topic: topic, Partition: 1}
	tbl, before := e.partition0Ahead(topic, table, 2) // p0 15, p1 10; before: p0 10
	// p0 15, p1 10. p1 has 5 records to read; as the live sink's session
	// starts, the operator rolls main back to before: p0 back to 10.
	e.Produce(records(topic, 1, 5, "b"))
	var once sync.Once
	started := make(chan struct{})
	stop := e.runLive(tbl, connector.Config{Topic: topic, FlushInterval: time.Minute, OnSession: func() {
		once.Do(func() {
			e.rollBack(table, before)
			close(started)
		})
	}})
	<-started
	// The session reads p1's 5 records (busy: never idle for the ledger
	// check), then is interrupted: its last flush commits p1 only.
	time.Sleep(2 * time.Second)
	_, err := stop()
	if err != nil {
		t.Fatalf("an interrupted sink whose last commit is in failed: %v", err)
	}
	if got := offsetsOf(t, e.Table(table), p1); len(got) != 15 {
		t.Errorf("partition 1 rows at offsets %v, want 0-14", got)
	}
}
