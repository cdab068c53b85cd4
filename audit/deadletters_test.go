package audit_test

import (
	"errors"
	"slices"
	"testing"
	"time"

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

// TestContentVerifiesTypedRowsAndDeadLetters: the content level decodes
// each record as the sink does and compares the row it makes with the
// table's (JSON values, a string key, Avro through the registry), and
// compares each dead letter with its record's bytes.
func TestContentVerifiesTypedRowsAndDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyString})
	at := time.UnixMilli(1_700_000_000_000)
	e.Produce([]*kgo.Record{
		{Topic: "orders", Timestamp: at, Key: []byte("a"), Value: []byte(`{"id":1,"tags":["x"],"at":{"d":1.5}}`), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
		{Topic: "orders", Timestamp: at, Key: []byte{0xff}, Value: []byte(`{"id":2}`)},
		{Topic: "orders", Timestamp: at, Key: []byte("c"), Value: nil},
		{Topic: "orders", Timestamp: at, Key: []byte("d"), Value: []byte(`{"id":"four"}`)},
		{Topic: "orders", Timestamp: at, Value: []byte(`{"id":5,"more":true}`)},
	})
	e.sink(tbl, connector.Config{Topic: "orders", DeadLetters: dlq, FlushRecords: 2})
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if !rep.Complete() {
		t.Fatalf("findings: %+v", rep.Findings)
	}
	c := rep.Partitions[0].Content
	if c.Verified != 3 || c.DeadLetters != 2 {
		t.Fatalf("content: %d verified, %d dead letters; want 3 and 2", c.Verified, c.DeadLetters)
	}

	// Against another cluster whose log differs in one decoded field and
	// one dead letter's bytes, the content level finds both.
	other := newEnv(t)
	other.Topic("orders", 1, nil)
	other.Produce([]*kgo.Record{
		{Topic: "orders", Timestamp: at, Key: []byte("a"), Value: []byte(`{"id":1,"tags":["y"],"at":{"d":1.5}}`), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
		{Topic: "orders", Timestamp: at, Key: []byte{0xfe}, Value: []byte(`{"id":2}`)},
		{Topic: "orders", Timestamp: at, Key: []byte("c"), Value: nil},
		{Topic: "orders", Timestamp: at, Key: []byte("d"), Value: []byte(`{"id":"four"}`)},
		{Topic: "orders", Timestamp: at, Value: []byte(`{"id":5,"more":true}`)},
	})
	rep = e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: other.Broker(), VerifyContent: true})
	var mismatched []int64
	for _, f := range rep.Findings {
		if f.Kind == audit.KindContentMismatch {
			for o := f.Offsets.Low; o < f.Offsets.High; o++ {
				mismatched = append(mismatched, o)
			}
		}
	}
	if !slices.Equal(mismatched, []int64{0, 1}) {
		t.Fatalf("content mismatches at %v, want offsets 0 and 1; findings %+v", mismatched, rep.Findings)
	}
}
