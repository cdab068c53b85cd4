package audit_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// jsonLog produces JSON values to partition 0 of topic; "" is a value that
// is not JSON.
func jsonLog(e *env, topic string, values ...string) {
	var recs []*kgo.Record
	for _, v := range values {
		if v == "" {
			v = "{not json"
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)})
	}
	e.Produce(recs)
}

// TestAuditCountsDeadLetters: a typed table whose bad records went to the
// dead-letter table is complete at every level, and the report says how
// many records went where.
func TestAuditCountsDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	jsonLog(e, "orders", `{"id":1}`, ``, `{"id":2}`, `{"id":"x"}`, `{"id":3}`)
	e.sink(tbl, connector.Config{Topic: "orders", DeadLetters: dlq, FlushRecords: 2})

	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker()})
	if !rep.Complete() {
		t.Fatalf("findings: %+v", rep.Findings)
	}
	p := rep.Partitions[0]
	if p.Records != 3 || p.DeadLetters != 2 || p.DeadLettersRead != 2 || p.Rows != 3 || p.Next != 5 {
		t.Fatalf("partition report: records %d dead letters %d (read %d) rows %d next %d", p.Records, p.DeadLetters, p.DeadLettersRead, p.Rows, p.Next)
	}
}

// TestAuditFindsPendingDeadLetters: a writer that stopped between its
// commit and adding the dead letters leaves a table that is not complete
// (dead-letters-pending) until the next sink session adds them.
func TestAuditFindsPendingDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tbl, dlq := e.TypedTable("lake.orders", layout)
	jsonLog(e, "orders", `{"id":1}`, ``, `{"id":2}`)
	// The dead-letter table disappears under the sink (renamed away): its
	// commit goes in, adding the dead letters fails.
	hidden := []string{"lake", "hidden"}
	if _, err := tbl.Catalog().RenameTable(e.Ctx, dlq.Identifier(), hidden); err != nil {
		t.Fatal(err)
	}
	_, err := e.Env.Sink(e.Broker(), tbl, connector.Config{Topic: "orders", DeadLetters: dlq, StopAtEnd: true})
	if _, pending := errors.AsType[*snapshot.DeadLettersPendingError](err); !pending {
		t.Fatalf("err = %v, want a DeadLettersPendingError", err)
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows})
	if !hasKind(rep, audit.KindMissingFile) {
		t.Fatalf("want a missing-file finding for the missing dead-letter table, got %+v", rep.Findings)
	}
	if _, err := tbl.Catalog().RenameTable(e.Ctx, hidden, dlq.Identifier()); err != nil {
		t.Fatal(err)
	}
	tbl, dlq = e.TypedTable("lake.orders", layout)
	rep = e.audit(tbl, audit.Options{Depth: audit.DepthRows})
	if len(rep.Findings) != 1 || !hasKind(rep, audit.KindDeadLettersPending) {
		t.Fatalf("want one dead-letters-pending finding, got %+v", rep.Findings)
	}

	// The next session adds them.
	e.sink(tbl, connector.Config{Topic: "orders", DeadLetters: dlq})
	rep = e.audit(tbl, audit.Options{Depth: audit.DepthRows})
	if !rep.Complete() || rep.Partitions[0].DeadLettersRead != 1 {
		t.Fatalf("after the roll forward: %d dead letters read, findings %+v", rep.Partitions[0].DeadLettersRead, rep.Findings)
	}
}

func hasKind(rep *audit.Report, k audit.Kind) bool {
	for _, f := range rep.Findings {
		if f.Kind == k {
			return true
		}
	}
	return false
}
