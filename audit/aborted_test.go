package audit_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// abortedThenDeleted builds the situation of connector's
// TestAbortedRecordsDeletedAreNotALoss: a bounded run stops at offset 10,
// where an open transaction begins (10-19); the transaction is aborted
// (marker 20), five records follow (21-25), and retention deletes [10, 15):
// only aborted records. It returns the table, whose ledger ends at 10.
func abortedThenDeleted(t *testing.T, e *env, topic string) *snapshot.Table {
	t.Helper()
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	txn := e.OpenTxn("open-" + topic)
	if err := txn.ProduceSync(e.Ctx, records(topic, 0, 10, "txn")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tbl := e.Table("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic})
	if err := txn.EndTransaction(e.Ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 5, "b"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 15); err != nil {
		t.Fatal(err)
	}
	return tbl
}

// TestAuditAbortedDeletedIsNoLoss: retention deleted offsets [10, 15) past the
// ledger's end, but they held only aborted records, which the sink does not
// count as a loss: its next run resumes with an aborted range and no error.
// The broker level reports a note, not "unrecorded-loss" (a false alarm
// whose suggested fix did not apply).
func TestAuditAbortedDeletedIsNoLoss(t *testing.T) {
	e := newEnv(t)
	tbl := abortedThenDeleted(t, e, "abortgap")
	expectFindings(t, e.audit(tbl, audit.Options{Broker: e.Broker()}))
	// The next run records the deleted offsets as aborted: every level is
	// clean, and a note says what was judged.
	e.sink(tbl, connector.Config{Topic: "abortgap"})
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep)
	if p := rep.Partitions[0]; len(p.Aborted) != 1 || p.Aborted[0] != (mapping.Interval{Low: 10, High: 15}) || len(p.Lost) != 0 {
		t.Fatalf("partition %+v: want [10, 15) recorded as aborted, nothing lost", p)
	}
	// The note says it is a judgement: a committed record of another
	// producer among the deleted offsets would leave no trace (a
	// reviewer's case: the note said "nothing was lost").
	if !slices.ContainsFunc(rep.Notes, func(n string) bool {
		return strings.Contains(n, "held only aborted records") && strings.Contains(n, "evidence, not proof")
	}) {
		t.Fatalf("notes %q: want one about the deleted aborted records, saying it is evidence, not proof", rep.Notes)
	}
}

// TestAbortedJudgementCountsSequences (from a review): producer P opens a
// transaction at offset 10 (10-14), another producer writes five committed
// records (15-19) while it is open, P writes 20-24 and aborts (marker 25).
// The sink stopped at the last stable offset, 10, and retention deletes
// [0, 22) before it runs again. The broker's abort index and the retained
// log (P's aborted records up to its marker) looked like only aborted
// records were deleted; P's sequence numbers say otherwise: its record at
// 22 is its eighth, so at most 7 of the 12 deleted offsets were its
// records. The audit finds the loss, and the next sink run refuses it
// (--on-data-loss fail), where both took it for aborted records.
func TestAbortedJudgementCountsSequences(t *testing.T) {
	e := newEnv(t)
	const topic = "interleaved"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	txn := e.OpenTxn("p-" + topic)
	if err := txn.ProduceSync(e.Ctx, records(topic, 0, 5, "txn1")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 5, "committed")) // 15-19: committed, not transactional
	if err := txn.ProduceSync(e.Ctx, records(topic, 0, 5, "txn2")...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tbl := e.Table("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic}) // stops at the LSO, 10
	if err := txn.EndTransaction(e.Ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 22); err != nil {
		t.Fatal(err)
	}
	rep := e.audit(tbl, audit.Options{Broker: e.Broker()})
	if !slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool {
		return f.Kind == audit.KindUnrecordedLoss && f.Offsets == mapping.Interval{Low: 10, High: 22}
	}) {
		t.Errorf("audit findings %+v, notes %q; want unrecorded-loss [10, 22): committed records 15-19 were deleted before they were sunk", rep.Findings, rep.Notes)
	}
	if _, err := e.Env.Sink(e.Broker(), tbl, connector.Config{Topic: topic, StopAtEnd: true}); !errors.As(err, new(*connector.DataLossError)) {
		t.Errorf("next sink run: %v; want the data loss refused", err)
	}
}
