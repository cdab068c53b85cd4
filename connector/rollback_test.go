package connector_test

import (
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestRollbackFencesIdlePartition: an operator rolls the table back to before
// a live sink's partition 1 entered the ledger, as in
// TestSinkFencedWhenRolledBack, but partition 1 is idle at that moment. The
// sink's next commit (partition 0 only) reloads the table and lands; when
// partition 1 gets records later, the sink must still be fenced for it (it
// read partition 1 in the ledger when its session began), and sink it again
// from its start. It used to restart partition 1 at its in-memory offset,
// with rows 0-9 never sunk again.
func TestRollbackFencesIdlePartition(t *testing.T) {
	e := newEnv(t)
	const topic, table = "rolled-idle", "lake.rolled_idle"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 10, "a"))
	tbl := e.Table(table)
	// Partition 0 alone first: the snapshot the operator rolls back to.
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, Partitions: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	before := tbl.Head().SnapshotID
	p0, p1 := mapping.TopicPartition{Topic: topic, Partition: 0}, mapping.TopicPartition{Topic: topic, Partition: 1}
	fenced := make(chan struct{}, 100)
	stop := e.runLive(tbl, connector.Config{Topic: topic, FlushInterval: 100 * time.Millisecond,
		OnFenced: func(error) { fenced <- struct{}{} }})
	e.Produce(records(topic, 1, 10, "a"))
	waitForNext(t, e, table, p1, 10)
	// Partition 1 is idle now; the operator rolls back.
	op := e.Table(table)
	txn := op.Iceberg().NewTransaction()
	if err := txn.RollbackToSnapshot(before); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 5, "b"))
	waitForNext(t, e, table, p0, 15)
	e.Produce(records(topic, 1, 5, "b"))
	waitForNext(t, e, table, p1, 15)
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	got := offsetsOf(t, e.Table(table), p1)
	if len(got) != 15 {
		t.Fatalf("partition 1 rows at %v after the rollback (fenced %d times), want offsets 0-14: its rolled-back rows were not sunk again; ledger coverage %+v",
			got, len(fenced), mapping.Cover(mustLedger(t, e.Table(table)).Ranges(p1)))
	}
}
