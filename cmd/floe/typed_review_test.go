package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// auditedRun is what sinkAudited saw: the sink's exit code and output, the table's
// rows (offset order) and the content audit's exit code and output.
type auditedRun struct {
	st         *localstack.Stack
	loc        []string
	sinkCode   int
	sinkOut    string
	rows       []floetest.Row
	auditCode  int
	auditOut   string
	registered map[string]int
}

// sinkAudited produces recs into a fresh one-partition topic, runs floe sink
// --stop-at-end with extra (a trailing "--schema-registry" gets the stack's
// registry URL), then floe audit --deep --verify-content.
func sinkAudited(t *testing.T, topic string, recs func(st *localstack.Stack) []*kgo.Record, extra ...string) auditedRun {
	t.Helper()
	st := topicStack(t, topic)
	if err := localstack.Produce(t.Context(), st.Brokers, recs(st)); err != nil {
		t.Fatal(err)
	}
	registry := false
	if n := len(extra); n > 0 && extra[n-1] == "--schema-registry" {
		extra, registry = append(slices.Clone(extra), st.Registry), true
	}
	cfg := st.Catalog()
	run := auditedRun{st: st, loc: []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}}
	sink := append([]string{"sink", "-b", st.Brokers[0], "-t", topic, "--table", "lake." + topic, "--stop-at-end"}, extra...)
	code, out, errs := floe(t, append(sink, run.loc...)...)
	run.sinkCode, run.sinkOut = code, out+errs
	if code == exitError {
		return run
	}
	run.rows = floetest.Rows(t, openTable(t, cfg, "lake."+topic))
	slices.SortFunc(run.rows, func(a, b floetest.Row) int { return cmp.Compare(a.Offset, b.Offset) })
	audit := append([]string{"audit", "--table", "lake." + topic, "--deep", "--verify-content", "-b", st.Brokers[0]}, run.loc...)
	if registry {
		audit = append(audit, "--schema-registry", st.Registry)
	}
	run.auditCode, out, errs = floe(t, audit...)
	run.auditOut = out + errs
	return run
}

func (r auditedRun) complete() bool {
	return r.auditCode == exitOK && strings.Contains(r.auditOut, "verdict: COMPLETE")
}

// TestKeyFieldNamedLikeMetadataColumn (from a review): an upsert table
// keyed by a JSON key's fields (--key json) makes each key field a column.
// A value field named like floe's own columns is a dead letter, but a key
// field was not checked: {"kafka_offset":7} became a second column
// kafka_offset and the flush panicked, every restart too. The record is a
// dead letter, the records after it rows.
func TestKeyFieldNamedLikeMetadataColumn(t *testing.T) {
	run := sinkAudited(t, "ev", func(st *localstack.Stack) []*kgo.Record {
		return []*kgo.Record{
			{Topic: "ev", Key: []byte(`{"kafka_offset":7}`), Value: []byte(`{"x":1}`)},
			{Topic: "ev", Key: []byte(`{"id":8}`), Value: []byte(`{"x":2}`)},
		}
	}, "--value", "json", "--key", "json", "--mode", "upsert")
	if run.sinkCode == exitError || len(run.rows) != 1 {
		t.Fatalf("sink: exit %d, %d rows; want the first record a dead letter and one row\n%s", run.sinkCode, len(run.rows), run.sinkOut)
	}
}

// TestPrimitiveRegistryKeyUpsert (from a review): --mode upsert --key
// registry with keys of the primitive Avro schema "string": every record
// is a dead letter, whose reason said "the record has no key", though each
// has one; it says the key is a string and names --key string.
func TestPrimitiveRegistryKeyUpsert(t *testing.T) {
	v1 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"amount","type":["null","long"],"default":null}]}`
	run := sinkAudited(t, "orders", func(st *localstack.Stack) []*kgo.Record {
		recs := avroRecords(t, st, "orders", v1, map[string]any{"id": int64(1), "amount": int64(100)})
		kid, err := localstack.RegisterSchema(t.Context(), st.Registry, "orders-key", sr.Schema{Schema: `"string"`})
		if err != nil {
			t.Fatal(err)
		}
		recs[0].Key = localstack.WireFormat(kid, nil, append([]byte{4}, "k1"...))
		return recs
	}, "--value", "registry", "--key", "registry", "--mode", "upsert", "--schema-registry")
	if strings.Contains(run.sinkOut, "the record has no key") || !strings.Contains(run.sinkOut, "the key is a string, not a record or an object") {
		t.Errorf("a record with a key is dead-lettered as having none (exit %d):\n%s", run.sinkCode, run.sinkOut)
	}
}

// TestAvroConverterDecimalWithoutPrecision (from a review): Confluent's
// AvroConverter writes a Connect Decimal without connect.decimal.precision
// (the JDBC source connector's NUMERIC, numeric.mapping=none) as an Avro
// decimal of precision 64, its default. floe refused a precision above 38,
// so every record was a dead letter, where the JsonConverter path takes
// the same Decimal as decimal(38, S); it takes it so too.
func TestAvroConverterDecimalWithoutPrecision(t *testing.T) {
	const schema = `{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"id","type":"long"},{"name":"amount","type":["null",{"type":"bytes","scale":2,"precision":64,"connect.version":1,"connect.parameters":{"scale":"2"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null}]}`
	run := sinkAudited(t, "pay", func(st *localstack.Stack) []*kgo.Record {
		id, err := localstack.RegisterSchema(t.Context(), st.Registry, "pay-value", sr.Schema{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		// id 1, amount 123.45 (unscaled 12345 = 0x3039)
		return []*kgo.Record{{Topic: "pay", Key: []byte("k"), Value: localstack.WireFormat(id, nil, []byte{0x02, 0x02, 0x04, 0x30, 0x39})}}
	}, "--value", "registry", "--schema-registry")
	if run.sinkCode != exitOK || len(run.rows) != 1 || run.rows[0].Columns["amount"] != "123.45" {
		t.Fatalf("sink: exit %d, rows %v; want one row with amount 123.45\n%s", run.sinkCode, run.rows, run.sinkOut)
	}
}

// TestJSONSchemaConverterDecimalExact (from a review): Confluent's
// JsonSchemaConverter writes a Kafka Connect Decimal (a Debezium NUMERIC
// column in decimal.handling.mode=precise, its default) as a JSON Schema
// "number" titled org.apache.kafka.connect.data.Decimal with its scale
// and precision in connect.parameters, and the value with every digit.
// floe mapped "number" to double: a numeric(20,2) balance of
// 123456789012345678.91 was stored rounded, and the content audit, which
// decodes the same way, said COMPLETE. It is a decimal(20,2) column.
func TestJSONSchemaConverterDecimalExact(t *testing.T) {
	row := func(idx int) string {
		return fmt.Sprintf(`{"connect.index":%d,"oneOf":[{"type":"null"},{"type":"object","title":"dbserver1.inventory.accounts.Value","properties":{`+
			`"id":{"type":"integer","connect.index":0,"connect.type":"int32"},`+
			`"balance":{"connect.index":1,"oneOf":[{"type":"null"},{"type":"number","title":"org.apache.kafka.connect.data.Decimal","connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"20"},"connect.type":"bytes"}]}}}]}`, idx)
	}
	env := `{"type":"object","title":"dbserver1.inventory.accounts.Envelope","properties":{"before":` + row(0) + `,"after":` + row(1) +
		`,"op":{"type":"string","connect.index":2},"ts_ms":{"connect.index":3,"oneOf":[{"type":"null"},{"type":"integer","connect.type":"int64"}]}}}`
	key := `{"type":"object","title":"dbserver1.inventory.accounts.Key","properties":{"id":{"type":"integer","connect.index":0,"connect.type":"int32"}}}`
	run := sinkAudited(t, "acc", func(st *localstack.Stack) []*kgo.Record {
		vid, err := localstack.RegisterSchema(t.Context(), st.Registry, "acc-value", sr.Schema{Schema: env, Type: sr.TypeJSON})
		if err != nil {
			t.Fatal(err)
		}
		kid, err := localstack.RegisterSchema(t.Context(), st.Registry, "acc-key", sr.Schema{Schema: key, Type: sr.TypeJSON})
		if err != nil {
			t.Fatal(err)
		}
		return []*kgo.Record{{Topic: "acc", Key: localstack.WireFormat(kid, nil, []byte(`{"id":1}`)),
			Value: localstack.WireFormat(vid, nil, []byte(`{"before":null,"after":{"id":1,"balance":123456789012345678.91},"op":"c","ts_ms":1700000000000}`))}}
	}, "--value", "registry", "--key", "registry", "--envelope", "debezium", "--schema-registry")
	if run.sinkCode != exitOK || len(run.rows) != 1 {
		t.Fatalf("sink: exit %d, %d rows\n%s", run.sinkCode, len(run.rows), run.sinkOut)
	}
	if got := run.rows[0].Columns["balance"]; got != "123456789012345678.91" {
		t.Errorf("balance = %s, want 123456789012345678.91 (numeric(20,2) in the source; audit complete: %v)", got, run.complete())
	}
}

// TestConnectDecimalIntoDoubleColumn: a table whose column a floe before
// TestJSONSchemaConverterDecimalExact made double from a JSON Schema
// Connect Decimal keeps taking that column's values (rounded, as before),
// where the decimal they now decode to would make every record a dead
// letter; the content audit agrees.
func TestConnectDecimalIntoDoubleColumn(t *testing.T) {
	plain := `{"type":"object","properties":{"id":{"type":"integer"},"amount":{"type":"number"}}}`
	titled := `{"type":"object","properties":{"id":{"type":"integer"},"amount":{"type":"number","title":"org.apache.kafka.connect.data.Decimal","connect.parameters":{"scale":"2","connect.decimal.precision":"10"}}}}`
	run := sinkAudited(t, "pay", func(st *localstack.Stack) []*kgo.Record {
		var recs []*kgo.Record
		for i, schema := range []string{plain, titled} {
			id, err := localstack.RegisterSchema(t.Context(), st.Registry, "pay-value", sr.Schema{Schema: schema, Type: sr.TypeJSON})
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, &kgo.Record{Topic: "pay", Value: localstack.WireFormat(id, nil, fmt.Appendf(nil, `{"id":%d,"amount":0.57}`, i))})
		}
		return recs
	}, "--value", "registry", "--schema-registry")
	// The same double as the plain number's (decimal128's ToFloat64 gave
	// 0.5700000000000001: a table written before failed its content audit;
	// from a review).
	if run.sinkCode != exitOK || len(run.rows) != 2 || run.rows[0].Columns["amount"] != "0.57" || run.rows[1].Columns["amount"] != "0.57" || !run.complete() {
		t.Fatalf("sink: exit %d, rows %v\n%s\naudit:\n%s", run.sinkCode, run.rows, run.sinkOut, run.auditOut)
	}
}

// TestUpsertKeyBehindDeadLetterNoted (from a review): in an upsert table a
// record that is a dead letter changes nothing, so its key keeps an older
// record's row: a JavaScript producer's price 10 (JSON.stringify(10.0))
// then 10.5 makes price a long column and the update a dead letter. The
// content audit, which folds the log without the dead letters, said
// COMPLETE without a word; it notes the keys whose latest record is a dead
// letter, naming the first and how to see its reason.
func TestUpsertKeyBehindDeadLetterNoted(t *testing.T) {
	run := sinkAudited(t, "prices", func(st *localstack.Stack) []*kgo.Record {
		return []*kgo.Record{
			{Topic: "prices", Key: []byte("a"), Value: []byte(`{"price":10}`)},
			{Topic: "prices", Key: []byte("a"), Value: []byte(`{"price":10.5}`)},
			{Topic: "prices", Key: []byte("b"), Value: []byte(`{"price":1.5}`)},
			{Topic: "prices", Key: []byte("b"), Value: []byte(`{"price":2}`)},
		}
	}, "--value", "json", "--key", "string", "--mode", "upsert")
	// b's first record is a dead letter, its latest a row: not noted.
	if len(run.rows) != 2 || run.rows[0].Columns["price"] != "10" || run.rows[1].Columns["price"] != "2" {
		t.Fatalf("sink: exit %d, rows %v\n%s", run.sinkCode, run.rows, run.sinkOut)
	}
	want := "1 key's latest record in the log is a dead letter (the first: prices/0 offset 1): a dead letter changes no row, so the table holds the record before it"
	if !strings.Contains(strings.Join(strings.Fields(run.auditOut), " "), want) || !run.complete() {
		t.Errorf("audit:\n%s\nwant the note %q", run.auditOut, want)
	}
}

// TestIDColumnFractionFirstIsDeadLetter (from a review): an upsert table
// keyed by --id-columns id over schemaless JSON whose first record has id
// 1.5 would make id a double column, which the commit refuses as a key
// column: the sink exited 2, and every run stopped at the same record for
// good. The record is a dead letter naming the type; the next record makes
// id a long.
func TestIDColumnFractionFirstIsDeadLetter(t *testing.T) {
	run := sinkAudited(t, "ev", func(st *localstack.Stack) []*kgo.Record {
		return []*kgo.Record{
			{Topic: "ev", Key: []byte("a"), Value: []byte(`{"id":1.5,"v":"bad"}`)},
			{Topic: "ev", Key: []byte("b"), Value: []byte(`{"id":2,"v":"good"}`)},
		}
	}, "--value", "json", "--mode", "upsert", "--id-columns", "id")
	if run.sinkCode != exitOK || len(run.rows) != 1 || run.rows[0].Columns["id"] != "2" || !run.complete() ||
		!strings.Contains(run.sinkOut, `first dead letter: ev/0 offset 0: the value's columns cannot key the table: key column "id" is a double`) {
		t.Fatalf("sink: exit %d, rows %v\n%s\naudit:\n%s", run.sinkCode, run.rows, run.sinkOut, run.auditOut)
	}
}

// TestProtobufConfluentKnownImports (from a review): Confluent's Protobuf
// serializers (skip.known.types, true by default), and so the
// ProtobufConverter, do not register Confluent's known dependencies
// (confluent/meta.proto, confluent/type/decimal.proto, google/type/*.proto)
// as references. floe resolved only google/protobuf/*, so every record of
// such a schema was a dead letter (exit 3). They are bundled.
func TestProtobufConfluentKnownImports(t *testing.T) {
	const proto = `syntax = "proto3";
package shop;

import "confluent/meta.proto";
import "confluent/type/decimal.proto";
import "google/type/date.proto";

message Order {
  int32 id = 1 [(confluent.field_meta) = { doc: "order id" }];
  google.type.Date placed = 2;
  confluent.type.Decimal amount = 3;
}
`
	run := sinkAudited(t, "orders", func(st *localstack.Stack) []*kgo.Record {
		id, err := localstack.RegisterSchema(t.Context(), st.Registry, "orders-value", sr.Schema{Schema: proto, Type: sr.TypeProtobuf})
		if err != nil {
			t.Fatal(err)
		}
		// id=7, placed={year:2026, month:12, day:5}
		body := []byte{0x08, 0x07, 0x12, 0x07, 0x08, 0xea, 0x0f, 0x10, 0x0c, 0x18, 0x05}
		return []*kgo.Record{{Topic: "orders", Key: []byte("k"), Value: localstack.WireFormat(id, []int{0}, body)}}
	}, "--value", "registry", "--schema-registry")
	if run.sinkCode != exitOK || len(run.rows) != 1 || run.rows[0].Columns["id"] != "7" || !strings.Contains(run.rows[0].Columns["placed"], "2026") || !run.complete() {
		t.Fatalf("sink: exit %d, rows %v; want one row with id 7\n%s", run.sinkCode, run.rows, run.sinkOut)
	}
}
