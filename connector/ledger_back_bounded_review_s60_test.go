package connector_test

import (
	"context"
	"sync"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestStopAtEndInterruptedAtLedgerBackIsUnfinished (review s60): a bounded
// run (--stop-at-end) leaves out of its session a partition the ledger
// already holds to its end (p0). Main goes back there during the run (a
// rollback, a published replay), and the run is interrupted as its commit
// of p1 lands: consume notes as unfinished only the session's partitions,
// so the batch job reads as done although p0 is 5 offsets short of the
// end it was run to (the very case consume's "a batch job that stopped
// short must not read as done" guards).
func TestStopAtEndInterruptedAtLedgerBackIsUnfinished(t *testing.T) {
	e := newEnv(t)
	const topic, table = "back-bounded", "lake.back_bounded"
	tbl, before := e.partition0Ahead(topic, table, 2) // p0 15, p1 10; before: p0 10
	// p1 gets 5 more. As the bounded run's session starts,
	// main is rolled back to before (p0 back to 10); the run is
	// interrupted as its commit of p1 lands.
	e.Produce(records(topic, 1, 5, "b"))
	e.checkInterruptedUnfinished(tbl, topic, table, before, 15, func(cancel func(), cfg *connector.Config) {
		cfg.OnCommit = func(snapshot.Result) { cancel() }
	})
}

// TestStopAtEndInterruptedWhenFencedIsUnfinished (review s60): a bounded
// run interrupted as its last flush is fenced (main went back on a
// partition the flush carries) stops through Sink.run's restart branch,
// which reports the table's positions and never notes the partitions
// short of their end: the run reads as done with partition 0 at 10 of 20.
func TestStopAtEndInterruptedWhenFencedIsUnfinished(t *testing.T) {
	e := newEnv(t)
	const topic, table = "back-fenced", "lake.back_fenced"
	tbl, before := e.partition0Ahead(topic, table, 1) // p0 15; before: p0 10
	// p0 15 of 20: as the run's session starts main goes back to 10, and
	// the run is interrupted as its flush of [15, 20) is fenced.
	e.Produce(records(topic, 0, 5, "c"))
	e.checkInterruptedUnfinished(tbl, topic, table, before, 20, func(cancel func(), cfg *connector.Config) {
		cfg.OnFenced = func(error) { cancel() }
	})
}

// checkInterruptedUnfinished runs a bounded sink of topic into tbl that
// rolls main back to before as its session starts (partition 0 back to
// 10) and that interrupt makes cancel the run, and checks that the run
// stopped with partition 0 at 10 and noted it unfinished, short of end.
func (e *env) checkInterruptedUnfinished(tbl *snapshot.Table, topic, table string, before, end int64, interrupt func(cancel func(), cfg *connector.Config)) {
	t := e.T
	t.Helper()
	p0 := mapping.TopicPartition{Topic: topic, Partition: 0}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	var once sync.Once
	cfg := connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(),
		OnSession: func() { once.Do(func() { e.rollBack(table, before) }) }}
	interrupt(cancel, &cfg)
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := s.Run(ctx)
	if err != nil {
		t.Fatalf("interrupted run: %v", err)
	}
	if n := offsetsOf(t, e.Table(table), p0); len(n) != 10 {
		t.Fatalf("partition 0 holds %d rows, want 10 (the run was interrupted before reading it again)", len(n))
	}
	if got, ok := stats.Unfinished[p0]; !ok || got != end {
		t.Errorf("the interrupted bounded run left %s at offset 10 of %d, but reads as done: Unfinished = %v, Next = %v",
			p0, end, stats.Unfinished, stats.Next)
	}
}

// TestStopAtEndRereadsPartitionMovedBack (review s60): a bounded run
// leaves out of its session a partition the ledger already has to its
// end, and never looks at it again: main moved back there during the run
// (a rollback, a published replay), and the run ends as done, without
// reading those offsets again, its summary at 10 of 15 with nothing
// unfinished. A live sink's session would read them again.
func TestStopAtEndRereadsPartitionMovedBack(t *testing.T) {
	e := newEnv(t)
	const topic, table = "back-done", "lake.back_done"
	p0 := mapping.TopicPartition{Topic: topic, Partition: 0}
	tbl, before := e.partition0Ahead(topic, table, 2) // p0 15, p1 10; before: p0 10
	e.Produce(records(topic, 1, 5, "b"))
	var once sync.Once
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, OnSession: func() {
		once.Do(func() {
			e.rollBack(table, before)
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := offsetsOf(t, e.Table(table), p0); len(got) != 15 {
		t.Errorf("the --stop-at-end run ended with partition 0 rows at offsets %v, want 0-14 (the end it was run to); Next %v, Unfinished %v",
			got, stats.Next, stats.Unfinished)
	}
}
