package audit_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewS66DiffLongLedgerSameVerdict: the rows and content levels of
// an event table and an upsert table no longer hold the ledger; on a
// ledger too long to keep its ranges (keepRangesMax, lowered to 0 here)
// they give the findings they give on a short one: ranges sharing rows
// and dead letters, a range committed twice over rows already held, a
// range whose count its rows do not match, a lost range over rows.
func TestReviewS66DiffLongLedgerSameVerdict(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	typed, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	jsonLog(e, "orders", `{"id":1}`, ``, `{"id":2}`, `{"id":"x"}`, `{"id":3}`, ``)
	e.sink(typed, connector.Config{Topic: "orders", DeadLetters: dlq, FlushRecords: 2})

	e.Topic("events", 1, nil)
	e.Produce(records("events", 0, 10, "e"))
	raw := e.Table("lake.events")
	e.sink(raw, connector.Config{Topic: "events", FlushRecords: 3})
	tp := mapping.TopicPartition{Topic: "events", Partition: 0}
	forceCommit(t, raw, tp, 2, 4, span(2, 4))
	forceCommit(t, raw, tp, 6, 8, []int64{6})
	floetest.ForceCommit(t, raw, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 8, High: 9}, Lost: true}}, nil)

	upsert := upsertedTopic(t, e, "accounts")

	opts := audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}
	tables := []*snapshot.Table{typed, raw, upsert}
	short := make([][]string, len(tables))
	for i, tbl := range tables {
		short[i] = stableFindings(e.audit(tbl, opts))
	}
	if len(short[1]) == 0 {
		t.Fatal("the tampered event table has no finding")
	}
	t.Logf("findings of a short ledger: %q", short)
	for i, tbl := range tables {
		rep := e.audit(tbl, audit.WithoutKept(opts))
		if got := stableFindings(rep); !slices.Equal(got, short[i]) {
			t.Errorf("%s: findings of a long ledger %q, of a short one %q", tbl.Name(), got, short[i])
		}
		if len(rep.Partitions) > 0 && rep.Partitions[0].LedgerRanges != nil {
			t.Errorf("%s: a long ledger's ranges are kept", tbl.Name())
		}
	}
}

// stableFindings are the report's findings. Of an offset two rows hold,
// the content level compared the first its scan met, which varied from
// run to run; it compares the one of the lower digest now (sortDigests).
func stableFindings(rep *audit.Report) []string { return findings(rep) }

// TestReviewS66DiffRowsReReadBesideExpiry: the rows level reads the
// ledger again (eachCommit) after reading the files, where it held the
// ledger from loadLedger. An expiry that runs meanwhile (a live sink's,
// RetainLast 1, after a compaction) removes the audited head and may
// merge the archive segment the audit loaded: the audit must still say
// the snapshot it audited expired (or be complete), not fail reading the
// ledger.
func TestReviewS66DiffRowsReReadBesideExpiry(t *testing.T) {
	e := newEnv(t)
	e.Topic("busy", 2, nil)
	tbl := e.Table("lake.busy")
	expire := func() {
		if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		e.Produce(append(records("busy", 0, 20, fmt.Sprint("a", i)), records("busy", 1, 20, fmt.Sprint("b", i))...))
		e.sink(tbl, connector.Config{Topic: "busy", FlushRecords: 10, NoMaintain: true})
		expire()
	}
	e.Produce(append(records("busy", 0, 20, "c"), records("busy", 1, 20, "d")...))
	e.sink(tbl, connector.Config{Topic: "busy", FlushRecords: 10, NoMaintain: true})
	auditor := e.OpenTable("lake.busy", snapshot.OpenOptions{})
	maintain := func() {
		e.Produce(append(records("busy", 0, 20, "e"), records("busy", 1, 20, "f")...))
		e.sink(tbl, connector.Config{Topic: "busy", FlushRecords: 10, NoMaintain: true})
		compact(t, tbl)
		expire()
	}
	prog := &hookProgress{after: maintain}
	rep, err := audit.Run(e.Ctx, auditor, audit.Options{Depth: audit.DepthRows, Concurrency: 1,
		Progress: func(string, int64) audit.Progress { return prog }})
	t.Logf("audit beside the expiry: %v", err)
	if _, ok := errors.AsType[*audit.AuditedSnapshotExpiredError](err); ok {
		return
	}
	if err != nil {
		t.Fatalf("rows audit whose snapshot was expired under it: %v; want an *AuditedSnapshotExpiredError", err)
	}
	for _, f := range rep.Findings {
		t.Errorf("finding on a table that lost nothing: %s %s %s", f.Level, f.Kind, f.Detail)
	}
}
