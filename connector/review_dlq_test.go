package connector_test

import (
	"errors"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestGroupAdoptionAddsPendingDeadLetters (review of issue 19: "every
// reconciliation (sink start, group adoption, ...) converges"): member B
// runs; member A joins the group, commits a flush of its partition with a
// dead letter, and dies before adding the dead letter to the dead-letter
// table (its appends to it fail). B adopts A's partition and goes on
// committing it. B, which took over the partition, must add A's pending
// dead letter: no other session may ever start.
func TestGroupAdoptionAddsPendingDeadLetters(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "adopt", "lake.adopt", "floe-adopt"
	e.Topic(topic, 2, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tblB, dlqB := e.TypedTable(table, layout)
	for p := range int32(2) {
		e.Produce(jsonRecords(topic, p, `{"id":1}`))
	}
	cfgB := groupConfig(topic, group)
	cfgB.DeadLetters = dlqB
	b := e.startMemberOn(tblB, cfgB)
	waitFor(t, 30*time.Second, "member B assigned both partitions", func() bool { return b.assigned.Load() == 2 })

	tblA, _ := e.TypedTable(table, layout)
	badA, _ := e.faultyDeadLetters(tblA)
	cfgA := groupConfig(topic, group)
	cfgA.DeadLetters = badA
	a := e.startMemberOn(tblA, cfgA)
	waitFor(t, 30*time.Second, "member A assigned a partition", func() bool { return a.assigned.Load() > 0 })
	time.Sleep(time.Second) // B has given it up
	for p := range int32(2) {
		e.Produce(jsonRecords(topic, p, `oops`, `{"id":2}`))
	}
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("member A did not stop on its pending dead letters")
	}
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](a.err); !ok {
		t.Fatalf("member A stopped with %v, want a DeadLettersPendingError", a.err)
	}
	waitFor(t, 30*time.Second, "member B took A's partition over", func() bool { return b.assigned.Load() >= 3 })
	for p := range int32(2) {
		e.Produce(jsonRecords(topic, p, `{"id":3}`))
	}
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 30*time.Second)
	time.Sleep(2 * time.Second)
	b.halt(t)
	tbl, dlq := e.TypedTable(table, layout)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	_, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if len(dead) != 2 {
		t.Errorf("%d dead letters in %s after B adopted A's partition and committed it, want 2 (A's is pending)", len(dead), dlq.Name())
	}
}
