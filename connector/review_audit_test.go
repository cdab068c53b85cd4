package connector_test

import (
	"fmt"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestReviewAuditMissesMissingDeadLetters: the ledger counts two dead
// letters whose dead-letter table does not hold them (a writer stopped
// before adding them). The issue says floe audit, at every level, checks
// the dead-letter table too: the table is not provably complete, and the
// audit must say so.
func TestReviewAuditMissesMissingDeadLetters(t *testing.T) {
	e := newEnv(t)
	pendingDeadLetters(t, e)
	tbl, _ := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	for _, d := range []audit.Depth{audit.DepthLedger, audit.DepthFiles, audit.DepthRows} {
		rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: d})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Complete() {
			t.Errorf("audit at depth %d: complete, although the dead-letter table lacks the ledger's 2 dead letters", d)
		}
	}
}

// TestReviewAuditVerifyContentTypedWithDeadLetters: --verify-content on a
// typed table with dead letters that are all in the dead-letter table is
// complete.
func TestReviewAuditVerifyContentTypedWithDeadLetters(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("keep-raw-value=%v", keep), func(t *testing.T) { testVerifyContentTyped(t, keep) })
	}
}

func testVerifyContentTyped(t *testing.T, keepRaw bool) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyString, RawValue: keepRaw})
	e.Produce(jsonRecords("orders", 0, `{"id":1}`, `oops`, `<tombstone>`, `{"id":2.5}`, `{"id":3,"s":{"a":[1,2]}}`))
	if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("finding: %+v", f)
	}
	t.Logf("notes: %v", rep.Notes)
}
