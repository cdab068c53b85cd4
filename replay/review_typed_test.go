package replay_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// typedWithDeadLetter sinks orders/0 = {"id":1}, oops, {"id":3} into the
// JSON table lake.orders: two rows and one dead letter.
func typedWithDeadLetter(t *testing.T, e *env) {
	t.Helper()
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce([]*kgo.Record{
		{Topic: "orders", Value: []byte(`{"id":1}`)},
		{Topic: "orders", Value: []byte(`oops`)},
		{Topic: "orders", Value: []byte(`{"id":3}`)},
	})
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{{Topic: "orders"}: 3})
}

// TestReviewReplayTypedBranchDeadLetters: a replay of a typed table onto a
// branch, published, with the table's dead-letter table (the only one
// there is: the library lets a replay pass it, the CLI cannot). The
// published table and its dead-letter table must hold every offset once.
// The branch's commits append their dead letters to the dead-letter table
// at once, beside main's, so the dead letters of the replayed offsets are
// there twice (and would be, unpublished, for a branch never published).
func TestReviewReplayTypedBranchDeadLetters(t *testing.T) {
	e := newEnv(t)
	typedWithDeadLetter(t, e)
	_, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	res, err := e.replay("lake.orders", replay.Options{Topic: "orders", Branch: "rebuild", Publish: true,
		Sink: connector.Config{DeadLetters: dlq}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Published {
		t.Fatal("not published")
	}
	// The published commits name the branch's dead-letter table; main's
	// dead letter of the commit the branch replaced is removed from main's
	// by the publish, so a reconcile after it finds nothing to do.
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	cat := tbl.Catalog()
	branchDLQ, err := snapshot.OpenDeadLetters(e.Ctx, cat, snapshot.BranchDeadLetterName(tbl.Identifier(), "rebuild"), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	floetest.CheckWithDeadLetters(t, tbl, branchDLQ, map[mapping.TopicPartition]int64{{Topic: "orders"}: 3})
	rec, err := tbl.ReconcileDeadLetters(e.Ctx, dlq, quietLogger())
	if err != nil || rec != (snapshot.Reconciled{}) {
		t.Fatalf("reconcile of main's dead-letter table after the publish: %+v, %v; want nothing left to do", rec, err)
	}
	if dead := floetest.Rows(t, dlq); len(dead) != 0 {
		t.Fatalf("main's dead-letter table still holds %d dead letters of replaced commits", len(dead))
	}
	auditComplete(t, e, tbl, "audit after publish")
}

// TestReviewReplayTypedTableAsTheCLIDoes: floe replay --branch of a typed
// table with a dead letter, with the options the CLI can give (no
// dead-letter table, no registry): the replay cannot rebuild the table (a
// BadRecordError at the dead letter), so a typed table with dead letters
// can never be replayed.
func TestReviewReplayTypedTableAsTheCLIDoes(t *testing.T) {
	e := newEnv(t)
	typedWithDeadLetter(t, e)
	res, err := e.replay("lake.orders", replay.Options{Topic: "orders", Branch: "rebuild", Publish: true})
	if err != nil {
		t.Fatalf("replay of a typed table with a dead letter: %v", err)
	}
	if !res.Complete {
		t.Fatal("replay not complete")
	}
}
