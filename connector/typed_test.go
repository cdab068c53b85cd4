package connector_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// jsonRecords makes records of one partition with the given values (nil:
// a tombstone), keyed k0, k1, ...
func jsonRecords(topic string, partition int32, values ...string) []*kgo.Record {
	out := make([]*kgo.Record, len(values))
	for i, v := range values {
		r := &kgo.Record{Topic: topic, Partition: partition, Key: []byte("k" + string(rune('0'+i)))}
		if v != "<tombstone>" {
			r.Value = []byte(v)
		}
		out[i] = r
	}
	return out
}

// columns lists a table's top-level columns with their types.
func columns(t *testing.T, e *env, tblName string, l mapping.Layout) map[string]string {
	t.Helper()
	tbl, _ := e.TypedTable(tblName, l)
	out := map[string]string{}
	for _, f := range tbl.Iceberg().Schema().Fields() {
		out[f.Name] = f.Type.String()
	}
	return out
}

// TestJSONSinkEvolvesAndDeadLetters sinks schemaless JSON over several
// flushes and two runs: fields that appear later become columns, a tombstone
// is a row with null value columns, and records that are not JSON objects or
// whose field type conflicts with its column go to the dead-letter table
// with the reason; the ledger counts each offset once, as a row or a dead
// letter.
func TestJSONSinkEvolvesAndDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 2, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyString}
	tbl, dlq := e.TypedTable("lake.orders", layout)
	e.Produce(jsonRecords("orders", 0,
		`{"id":1,"name":"a"}`,
		`{"id":2,"name":"b","tags":["x","y"]}`,
		`not json`,
		`{"id":"three"}`,
		`<tombstone>`,
		`{"id":4,"nested":{"a":1.5}}`,
		`{"id":5,"Kafka_Offset":7}`,
	))
	e.Produce(jsonRecords("orders", 1,
		`[1,2]`,
		`{"id":10,"price":2}`,
		`{"id":11,"price":2.5}`,
		`{"id":12,"score":2.5}`,
		`{"id":13,"score":3}`,
	))
	cfg := connector.Config{Topic: "orders", StopAtEnd: true, FlushRecords: 2, DeadLetters: dlq}
	stats, err := e.sink(tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != 7 || stats.DeadLetters != 5 {
		t.Fatalf("rows %d, dead letters %d; want 7 and 5", stats.Records, stats.DeadLetters)
	}
	want := map[mapping.TopicPartition]int64{{Topic: "orders", Partition: 0}: 7, {Topic: "orders", Partition: 1}: 5}
	rows, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if len(rows) != 7 || len(dead) != 5 {
		t.Fatalf("%d rows, %d dead letters", len(rows), len(dead))
	}
	cols := columns(t, e, "lake.orders", layout)
	for name, typ := range map[string]string{"id": "long", "name": "string", "tags": "list<string>", "nested": "struct<3: a: optional double>", "price": "long", "score": "double", mapping.ColKey: "string"} {
		if got := cols[name]; !strings.HasPrefix(got, strings.SplitN(typ, "<", 2)[0]) {
			t.Errorf("column %s: %s, want %s", name, got, typ)
		}
	}
	if _, ok := cols[mapping.ColRawValue]; ok {
		t.Error("kafka_value kept without --keep-raw-value")
	}
	byOffset := map[[2]int64]floetest.Row{}
	for _, r := range rows {
		byOffset[[2]int64{int64(r.TP.Partition), r.Offset}] = r
	}
	if r := byOffset[[2]int64{0, 4}]; r.Columns["id"] != "(null)" || r.Columns["name"] != "(null)" || r.Key != "k4" {
		t.Errorf("tombstone row: key %q columns %v", r.Key, r.Columns)
	}
	if r := byOffset[[2]int64{0, 1}]; r.Columns["id"] != "2" || r.Columns["tags"] != `["x","y"]` || r.Columns["name"] != "b" {
		t.Errorf("row 0@1: %v", r.Columns)
	}
	if r := byOffset[[2]int64{1, 4}]; r.Columns["score"] != "3" {
		t.Errorf("an integer in a double column: %v", r.Columns)
	}
	reasons := map[[2]int64]string{}
	for _, d := range dead {
		reasons[[2]int64{int64(d.TP.Partition), d.Offset}] = d.Columns[mapping.ColError]
		t.Logf("dead letter %s@%d: %s", d.TP, d.Offset, d.Columns[mapping.ColError])
		if d.ValNil {
			t.Errorf("dead letter %s@%d lost its value", d.TP, d.Offset)
		}
	}
	// A fraction in a long column is a conflict: Iceberg cannot widen long
	// to double (docs/typed-tables.md).
	for at, want := range map[[2]int64]string{{0, 2}: "json", {0, 3}: "id", {1, 0}: "not a JSON object", {1, 2}: "price", {0, 6}: "named like floe's metadata column kafka_offset"} {
		if !strings.Contains(reasons[at], want) {
			t.Errorf("dead letter %v: reason %q, want it to mention %q", at, reasons[at], want)
		}
	}

	// Which type the column got depends on which number came first
	// (price: 2 then 2.5, score: 2.5 then 3): the reason says so, and what
	// to do (docs/typed-tables.md, "Schemaless JSON").
	if r := reasons[[2]int64{1, 2}]; !strings.Contains(r, "an integer arrived first and made the column long") || !strings.Contains(r, "(1.0)") {
		t.Errorf("a fraction in a long column: reason %q does not say that the first value made it long, or what to do", r)
	}

	// A second run: a field appears, a nested one grows, and a fraction
	// arrives in the long column, which Iceberg cannot widen to double.
	e.Produce(jsonRecords("orders", 0,
		`{"id":5,"nested":{"a":2,"b":"new"},"flag":true}`,
		`{"id":6.5}`,
	))
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	want[mapping.TopicPartition{Topic: "orders", Partition: 0}] = 9
	rows, dead = floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if len(rows) != 8 || len(dead) != 6 {
		t.Fatalf("after the second run: %d rows, %d dead letters; want 8 and 6", len(rows), len(dead))
	}
	cols = columns(t, e, "lake.orders", layout)
	if cols["flag"] != "boolean" || !strings.Contains(cols["nested"], "b: optional string") {
		t.Errorf("columns after evolution: %v", cols)
	}
}

// TestDeadLettersOffStopsAtTheBadRecord: without a dead-letter table, the
// first record that cannot become a row stops the sink with one error
// naming its partition and offset, after committing what came before it.
func TestDeadLettersOffStopsAtTheBadRecord(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, _ := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(jsonRecords("orders", 0, `{"id":1}`, `{"id":2}`, `{oops`, `{"id":4}`))
	stats, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true})
	var bad *connector.BadRecordError
	if !errors.As(err, &bad) || bad.Offset != 2 || bad.Partition.Partition != 0 {
		t.Fatalf("err = %v, want a BadRecordError at orders/0 offset 2", err)
	}
	if !strings.Contains(err.Error(), "orders/0 offset 2") {
		t.Errorf("error does not name the record: %v", err)
	}
	floetest.CheckExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{{Topic: "orders", Partition: 0}: 2})
	// The run's summary gives the offsets it committed (from a new-user
	// run: it gave those the run began with).
	if n := stats.Next[mapping.TopicPartition{Topic: "orders", Partition: 0}]; n != 2 {
		t.Errorf("the failed run's next offset is %d, want 2, as committed", n)
	}
}

// Schema versions of TestRegistryEvolution's Avro orders: v2 adds an
// optional field, v3 promotes id from int to long, v4 changes name from
// string to int, which Iceberg cannot express.
var orderVersions = []string{
	`{"type":"record","name":"Order","fields":[{"name":"id","type":"int"},{"name":"name","type":"string"}]}`,
	`{"type":"record","name":"Order","fields":[{"name":"id","type":"int"},{"name":"name","type":"string"},{"name":"note","type":["null","string"],"default":null}]}`,
	`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"note","type":["null","string"],"default":null}]}`,
	`{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"name","type":"int"},{"name":"note","type":["null","string"],"default":null}]}`,
}

// avroOrderV encodes an order of schema version v (1-based); note "" is
// null.
func avroOrderV(v int, id int64, name, note string) []byte {
	b := avroLong(nil, id)
	if v == 4 {
		b = avroLong(b, int64(len(name)))
	} else {
		b = avroString(b, name)
	}
	if v >= 2 {
		if note == "" {
			b = avroLong(b, 0)
		} else {
			b = avroString(avroLong(b, 1), note)
		}
	}
	return b
}

// TestRegistryEvolution sinks Avro records through the schema registry
// while their schema evolves, over several flushes and restarts: an added
// optional field becomes a column (null in older rows), a promoted type
// widens its column, and an incompatible version, a payload without the
// wire header and an unknown schema id go to the dead-letter table; with
// ConflictFail the incompatible version stops the sink cleanly before it.
func TestRegistryEvolution(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	ids := make([]int, len(orderVersions))
	for i, s := range orderVersions {
		ids[i] = register(t, e.Stack.Registry, "orders-value", sr.Schema{Schema: s})
	}
	layout := mapping.Layout{Value: mapping.ValueRegistry}
	tbl, dlq := e.TypedTable("lake.orders", layout)
	cfg := connector.Config{Topic: "orders", StopAtEnd: true, FlushRecords: 2, DeadLetters: dlq, Registry: e.Registry()}
	produce := func(v int, from, n int64) {
		var recs []*kgo.Record
		for id := from; id < from+n; id++ {
			note := ""
			if id%2 == 0 {
				note = fmt.Sprintf("note %d", id)
			}
			recs = append(recs, &kgo.Record{Topic: "orders", Value: localstack.WireFormat(ids[v-1], nil, avroOrderV(v, id, fmt.Sprintf("n%d", id), note))})
		}
		e.Produce(recs)
	}
	tp := mapping.TopicPartition{Topic: "orders"}
	produce(1, 0, 3)
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if cols := columns(t, e, "lake.orders", layout); cols["id"] != "int" || cols["name"] != "string" {
		t.Fatalf("v1 columns: %v", cols)
	}
	produce(2, 3, 3)
	produce(3, 6, 3)
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	cols := columns(t, e, "lake.orders", layout)
	if cols["id"] != "long" || cols["name"] != "string" || cols["note"] != "string" {
		t.Fatalf("v3 columns: %v", cols)
	}
	rows, _ := floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{tp: 9})
	for _, r := range rows {
		wantNote := "(null)"
		if r.Offset >= 3 && r.Offset%2 == 0 {
			wantNote = fmt.Sprintf("note %d", r.Offset)
		}
		if r.Columns["id"] != fmt.Sprint(r.Offset) || r.Columns["name"] != fmt.Sprintf("n%d", r.Offset) || r.Columns["note"] != wantNote {
			t.Errorf("row %d: %v", r.Offset, r.Columns)
		}
	}

	// v4, a payload without the wire header and an unknown schema id: dead
	// letters; a v3 record after them is a row.
	produce(4, 9, 2)
	e.Produce([]*kgo.Record{
		{Topic: "orders", Value: []byte(`{"id":11}`)},
		{Topic: "orders", Value: localstack.WireFormat(9999, nil, avroOrderV(3, 12, "x", ""))},
	})
	produce(3, 13, 1)
	failing := cfg
	failing.OnSchemaConflict = connector.ConflictFail
	_, err := e.sink(tbl, failing)
	var bad *connector.BadRecordError
	if !errors.As(err, &bad) || bad.Offset != 9 {
		t.Fatalf("with ConflictFail: err = %v, want a BadRecordError at offset 9", err)
	}
	floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{tp: 9})
	stats, err := e.sink(tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != 1 || stats.DeadLetters != 4 {
		t.Fatalf("rows %d, dead letters %d; want 1 and 4", stats.Records, stats.DeadLetters)
	}
	_, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{tp: 14})
	reasons := map[int64]string{}
	for _, d := range dead {
		reasons[d.Offset] = d.Columns[mapping.ColError] + " schema_id=" + d.Columns[mapping.ColSchemaID]
	}
	for off, want := range map[int64]string{
		9:  fmt.Sprintf("int (Iceberg allows only adding optional fields and widening int to long, float to double and a decimal's precision) schema_id=%d", ids[3]),
		11: "wire format",
		12: "9999",
	} {
		if !strings.Contains(reasons[off], want) {
			t.Errorf("dead letter %d: %q, want it to contain %q", off, reasons[off], want)
		}
	}
}

// TestSinksProgressUnderColumnChurn: two live sinks of disjoint partitions
// of one JSON table, each of whose records adds a field, about every 20 ms
// each. A flush whose streamed files were written for a schema the other
// writer changed before its commit was given up and read again; one
// writer lost to the other's schema changes 20 flushes in a row and
// stopped for good (snapshot.ErrSchemaMoved). Both must keep up, and the
// table hold every record once with its values in its own column.
func TestSinksProgressUnderColumnChurn(t *testing.T) {
	e := newEnv(t)
	e.Topic("churn", 2, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tbl, dlq := e.TypedTable("lake.churn", layout)
	var stops [2]func() (connector.Stats, error)
	for p := range int32(2) {
		// Each sink opens the table as its own process would.
		own, ownDLQ := e.TypedTable("lake.churn", layout)
		stops[p] = e.runLive(own, connector.Config{Topic: "churn", Partitions: []int32{p}, FlushInterval: 20 * time.Millisecond, DeadLetters: ownDLQ})
	}
	const n = 150
	for i := range n {
		for p := range int32(2) {
			e.Produce(jsonRecords("churn", p, fmt.Sprintf(`{"id":%d,"f%d_%d":%d}`, i, p, i, i)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for p := range int32(2) {
		waitForNext(t, e, "lake.churn", mapping.TopicPartition{Topic: "churn", Partition: p}, n)
	}
	for p, stop := range stops {
		if _, err := stop(); err != nil {
			t.Fatalf("sink of partition %d: %v", p, err)
		}
	}
	want := map[mapping.TopicPartition]int64{{Topic: "churn", Partition: 0}: n, {Topic: "churn", Partition: 1}: n}
	rows, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if len(rows) != 2*n || len(dead) != 0 {
		t.Fatalf("%d rows, %d dead letters", len(rows), len(dead))
	}
	for _, r := range rows {
		if got := r.Columns[fmt.Sprintf("f%d_%d", r.TP.Partition, r.Offset)]; got != fmt.Sprint(r.Offset) {
			t.Fatalf("row %s@%d: %v", r.TP, r.Offset, r.Columns)
		}
	}
}

// TestConcurrentSinksEvolveOneSchema: two sinks of disjoint partitions
// evolve one typed table at once, each adding its own columns over many
// small commits; the table ends with one schema holding both, and every
// row reads back with its values (a commit that lost the race rewrote its
// files for the schema the winner committed).
func TestConcurrentSinksEvolveOneSchema(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 2, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tbl, dlq := e.TypedTable("lake.orders", layout)
	const n = 60
	for p := range int32(2) {
		var values []string
		for i := range n {
			values = append(values, fmt.Sprintf(`{"id":%d,"f%d_%d":%d}`, i, p, i/10, i))
		}
		e.Produce(jsonRecords("orders", p, values...))
	}
	errs := make(chan error, 2)
	for p := range int32(2) {
		go func() {
			// Each sink opens the table as its own process would.
			own, ownDLQ := e.TypedTable("lake.orders", layout)
			_, err := e.sink(own, connector.Config{Topic: "orders", Partitions: []int32{p}, StopAtEnd: true, FlushRecords: 5, DeadLetters: ownDLQ})
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := map[mapping.TopicPartition]int64{{Topic: "orders", Partition: 0}: n, {Topic: "orders", Partition: 1}: n}
	rows, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if len(rows) != 2*n || len(dead) != 0 {
		t.Fatalf("%d rows, %d dead letters", len(rows), len(dead))
	}
	cols := columns(t, e, "lake.orders", layout)
	for p := range 2 {
		for g := range n / 10 {
			if cols[fmt.Sprintf("f%d_%d", p, g)] != "long" {
				t.Fatalf("column f%d_%d missing: %v", p, g, cols)
			}
		}
	}
	for _, r := range rows {
		i := r.Offset
		if got := r.Columns[fmt.Sprintf("f%d_%d", r.TP.Partition, i/10)]; got != fmt.Sprint(i) {
			t.Fatalf("row %s@%d: %v", r.TP, i, r.Columns)
		}
	}
}
