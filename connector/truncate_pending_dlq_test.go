package connector_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestDebeziumPendingTruncateDeadLetter (from a review): a Debezium table
// sunk with --on-truncate dead-letter (the default); the commit holding
// the truncate event is in, but its dead letter is not (the writer stopped
// between the data commit and the dead-letter commit: here the dead-letter
// table's commits fail, a DeadLettersPendingError). The sink runs again,
// this time with --on-truncate delete-all: the truncate stays the dead
// letter it was committed as, added exactly once by the reconcile, and the
// table keeps the rows from before it. The content audit then says
// COMPLETE (this holds).
//
// Before the rerun, audit --deep --brokers --verify-content says not
// complete (dead-letters-pending), and nothing else: the content level
// took the dead letters the dead-letter table holds only, so it folded the
// pending truncate as applied, a count-mismatch and a superseded-row for
// every row committed before it on a table that is exactly right (an
// operator who "repaired" it with replay --on-truncate delete-all
// --publish-different would delete every one of those rows). It now takes
// the pending dead letters from the files the ledger's commit lists too.
func TestDebeziumPendingTruncateDeadLetter(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.customers-pending"
	e.Topic(topic, 1, nil)
	c := floetest.NewCustomers(topic, 1)
	c.Story(10, 25, 3)
	c.Truncate()
	c.Insert(floetest.Customer{ID: 900, FirstName: "Ada", LastName: "Lovelace", Email: "ada@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	c.Update(900, func(cu *floetest.Customer) { cu.Email = "ada@example.org" })
	recs := c.Records(t, floetest.CDCConnectJSON, "")
	e.Produce(recs)
	tbl, _ := e.debeziumTable("lake.pending_truncate", floetest.CDCConnectJSON)
	bad, _ := e.faultyDeadLetters(tbl)
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: bad})
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](err); !ok {
		t.Fatalf("first run: %v, want a DeadLettersPendingError", err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range rep.Findings {
		kinds = append(kinds, fmt.Sprintf("%s %s", f.Kind, f.Detail))
	}
	t.Logf("audit before the rerun: %d findings: %.600v", len(rep.Findings), kinds)
	if rep.Complete() {
		t.Errorf("audit --deep --verify-content with the truncate's dead letter pending: COMPLETE, want findings")
	}
	for _, f := range rep.Findings {
		if f.Kind != audit.KindDeadLettersPending {
			t.Errorf("audit with the truncate's dead letter pending reports %s on a table whose rows are right (only dead-letters-pending is true): %s", f.Kind, f.Detail)
			break
		}
	}

	// Rerun, now with --on-truncate delete-all.
	_, dlq := e.debeziumTable("lake.pending_truncate", floetest.CDCConnectJSON)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	c.CheckTable(t, rows(t, tbl), floetest.CDCConnectJSON, false)
	if n := len(rows(t, dlq)); n != 1 {
		t.Errorf("the dead-letter table holds %d rows after the rerun, want the truncate once", n)
	}
	rep, err = audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if err != nil || !rep.Complete() {
		t.Fatalf("audit --deep --verify-content after the rerun: %v, findings %+v", err, rep.Findings)
	}
}

// TestWhereKeyPendingTruncateDeadLetter (from a review): the where --key side
// of TestDebeziumPendingTruncateDeadLetter. Key 800 is inserted and
// deleted (d and tombstone) before a truncate that the sink dead-letters
// (--on-truncate dead-letter), in one commit whose dead letter is pending.
// floe where --key '{"id":800}' --brokers must answer as it does once the
// dead letter is in: the table and the log are the same either way.
func TestWhereKeyPendingTruncateDeadLetter(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.customers-wherepending"
	e.Topic(topic, 1, nil)
	c := floetest.NewCustomers(topic, 1)
	c.Story(6, 10, 4)
	c.Insert(floetest.Customer{ID: 800, FirstName: "Ken", LastName: "Thompson", Email: "ken@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	c.Delete(800)
	c.Truncate()
	c.Insert(floetest.Customer{ID: 900, FirstName: "Ada", LastName: "Lovelace", Email: "ada@example.com", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	e.Produce(c.Records(t, floetest.CDCConnectJSON, ""))
	tbl, _ := e.debeziumTable("lake.where_pending", floetest.CDCConnectJSON)
	bad, _ := e.faultyDeadLetters(tbl)
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: bad})
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](err); !ok {
		t.Fatalf("first run: %v, want a DeadLettersPendingError", err)
	}
	answer := func() lookup.KeyResult {
		t.Helper()
		if err := tbl.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":800}`)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	pending := answer()
	_, dlq := e.debeziumTable("lake.where_pending", floetest.CDCConnectJSON)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: dlq}); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	in := answer()
	t.Logf("pending: %s by %s at %v: %s", pending.Status, pending.FoundBy, offOr(pending.Offset), pending.Explanation)
	t.Logf("in: %s by %s at %v: %s", in.Status, in.FoundBy, offOr(in.Offset), in.Explanation)
	if pending.Status != in.Status || pending.FoundBy != in.FoundBy || offOr(pending.Offset) != offOr(in.Offset) {
		t.Errorf("where --key with the truncate's dead letter pending: %s (found by %s, offset %v), once it is in: %s (found by %s, offset %v): %s",
			pending.Status, pending.FoundBy, offOr(pending.Offset), in.Status, in.FoundBy, offOr(in.Offset), pending.Explanation)
	}
}

func offOr(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}
