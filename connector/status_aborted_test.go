package connector_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
)

// TestStatusLostAbortedOnly (from a review): the sink's ledger ends at 10, where a
// transaction began (10-19); it is aborted (marker 20), records follow
// (21-25) and retention deletes [10, 15): aborted records only. The audit
// (broker level) and the next sink run agree that nothing was lost (the
// offsets are recorded as aborted). floe status does not report those 5
// offsets as lost ("deleted by retention before they were sunk (the next
// sink run fails on them, or records them as lost)"): it did, in its LOST
// column and --json "lost".
func TestStatusLostAbortedOnly(t *testing.T) {
	e := newEnv(t)
	const topic = "abortgap"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	txn := e.OpenTxn("open-" + topic)
	if err := txn.ProduceSync(e.Ctx, records(topic, 0, 10, "txn")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tbl := e.Table("lake." + topic)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(e.Ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 5, "b"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 15); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Broker: e.Dial()})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Fatalf("audit: findings %v", rep.Findings)
	}
	st, err := lookup.Status(e.Ctx, tbl, e.Dial(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Partitions[0]; p.Lost != nil {
		t.Errorf("floe status: partition 0 lost %d (log start %d, table next %d), but the deleted offsets held only aborted records: the sink records them as aborted, not lost", *p.Lost, *p.LogStart, *p.TableNext)
	}
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatalf("next run: %v", err)
	}
}
