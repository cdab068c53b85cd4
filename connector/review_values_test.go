package connector_test

// A review of typed tables' values: records whose values floe stored
// wrongly, dropped, or dead-lettered against what docs/typed-tables.md and
// docs/upsert.md say. Each TestReviewValues... test failed on the code it
// was written against (its comment says how) and passes since its fix; the
// TestReviewValuesHolds... tests are attacks that held.

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// valuesScan reads column col of every row of tbl with iceberg-go's scan, by
// offset, as the Arrow value (nil for null).
func valuesScan(t *testing.T, tbl *snapshot.Table, col string) map[int64]any {
	t.Helper()
	out := map[int64]any{}
	headBatches(t, tbl, func(b arrow.RecordBatch) {
		off := b.Column(b.Schema().FieldIndices(mapping.ColOffset)[0]).(*array.Int64)
		idx := b.Schema().FieldIndices(col)
		for i := range int(b.NumRows()) {
			if len(idx) == 0 {
				out[off.Value(i)] = nil
				continue
			}
			c := b.Column(idx[0])
			if c.IsNull(i) {
				out[off.Value(i)] = nil
				continue
			}
			switch c := c.(type) {
			case *array.Time64:
				out[off.Value(i)] = int64(c.Value(i))
			case *array.Timestamp:
				out[off.Value(i)] = int64(c.Value(i))
			case *array.Int64:
				out[off.Value(i)] = c.Value(i)
			case *array.Float64:
				out[off.Value(i)] = c.Value(i)
			case *array.String:
				out[off.Value(i)] = c.Value(i)
			default:
				out[off.Value(i)] = c.ValueStr(i)
			}
		}
	})
	return out
}

// sinkRegistryTopic sinks topic, whose values are in the schema
// registry's wire format, to its end into a new table lake.TOPIC with its
// dead-letter table.
func sinkRegistryTopic(t *testing.T, e *env, topic string) (tbl, dlq *snapshot.Table) {
	t.Helper()
	tbl, dlq = e.TypedTable("lake."+topic, mapping.Layout{Value: mapping.ValueRegistry})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Registry: e.Registry()}); err != nil {
		t.Fatal(err)
	}
	return tbl, dlq
}

// valuesDead returns the dead letters of dlq by offset: their reasons.
func valuesDead(t *testing.T, dlq *snapshot.Table) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, d := range floetest.Rows(t, dlq) {
		out[d.Offset] = d.Columns[mapping.ColError]
	}
	return out
}

// TestReviewValuesJSONInvalidUTF8IsNotReplaced: a JSON value whose string holds
// bytes that are not UTF-8 ("a\xffb") or an unpaired surrogate escape
// ("\ud800") is not the text the producer wrote. RFC 8259 §8.1 requires
// JSON text to be UTF-8, and docs/typed-tables.md says malformed JSON is a
// dead letter and (for the registry formats, JSON Schema included) "Strings
// must be valid UTF-8 ... a string field that is not is a decode error".
// encoding/json, which parseJSON uses, silently replaces such bytes by
// U+FFFD: floe stores "a\uFFFDb", a value the producer never wrote, with
// no dead letter, and the raw bytes are gone (and `floe audit
// --verify-content` decodes the same way, so it cannot notice). Expected:
// each such record is a dead letter (its bytes kept in kafka_value); the
// valid records around them are rows.
func TestReviewValuesJSONInvalidUTF8IsNotReplaced(t *testing.T) {
	t.Run("value-json", func(t *testing.T) {
		e := newEnv(t)
		e.Topic("u8", 1, nil)
		tbl, dlq := e.TypedTable("lake.u8", mapping.Layout{Value: mapping.ValueJSON})
		e.Produce(jsonRecords("u8", 0,
			`{"id":0,"s":"ok"}`,
			"{\"id\":1,\"s\":\"a\xffb\"}",
			`{"id":2,"s":"\ud800x"}`,
			"{\"id\":3,\"s\xfe\":\"key not UTF-8\"}",
		))
		if _, err := e.sink(tbl, connector.Config{Topic: "u8", StopAtEnd: true, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
		s := valuesScan(t, tbl, "s")
		dead := valuesDead(t, dlq)
		for off := int64(1); off <= 3; off++ {
			if _, isDead := dead[off]; !isDead {
				v, _ := s[off].(string)
				t.Errorf("offset %d: stored as a row (s=%q, valid UTF-8 %v), want a dead letter: the producer's bytes were not UTF-8 text", off, v, utf8.ValidString(v))
			}
		}
		for _, f := range tbl.Iceberg().Schema().Fields() {
			if strings.ContainsRune(f.Name, utf8.RuneError) {
				t.Errorf("column %q: a name with U+FFFD the producer never wrote", f.Name)
			}
		}
	})
	t.Run("json-schema", func(t *testing.T) {
		e := newEnv(t)
		e.Topic("u8s", 1, nil)
		id := register(t, e.Stack.Registry, "u8s-value", sr.Schema{Type: sr.TypeJSON,
			Schema: `{"type":"object","properties":{"id":{"type":"integer"},"s":{"type":"string"}}}`})
		e.Produce([]*kgo.Record{
			{Topic: "u8s", Value: localstack.WireFormat(id, nil, []byte(`{"id":0,"s":"ok"}`))},
			{Topic: "u8s", Value: localstack.WireFormat(id, nil, []byte("{\"id\":1,\"s\":\"a\xffb\"}"))},
		})
		tbl, dlq := sinkRegistryTopic(t, e, "u8s")
		if _, isDead := valuesDead(t, dlq)[1]; !isDead {
			t.Errorf("offset 1: stored as a row (s=%q), want a dead letter: a JSON Schema string that is not UTF-8 is a decode error (docs/typed-tables.md)", valuesScan(t, tbl, "s")[1])
		}
	})
}

// TestReviewValuesJSONBigIntegerInDoubleColumn: docs/typed-tables.md, schemaless
// JSON: "fraction first ({"a":1.5} then {"a":1}) makes a double, and
// integers go in as doubles (JSON does not tell 1 from 1.0), with no dead
// letter", and "Within one record the kinds meet first: [1, 2.5] is
// list<double>". An integer beyond a long's range is still a JSON number
// a double holds (1e20 exactly). floe infers each integer as long before
// it looks at the column, so {"a":100000000000000000000} in the double
// column a, and [1.5, 100000000000000000000], are dead letters ("integer
// ... (out of range) does not fit column type long"). Expected: rows with
// a = 1e20 and l = [1.5, 1e20].
func TestReviewValuesJSONBigIntegerInDoubleColumn(t *testing.T) {
	e := newEnv(t)
	e.Topic("big", 1, nil)
	tbl, dlq := e.TypedTable("lake.big", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(jsonRecords("big", 0,
		`{"a":1.5}`,
		`{"a":100000000000000000000}`,
		`{"l":[1.5,100000000000000000000]}`,
	))
	if _, err := e.sink(tbl, connector.Config{Topic: "big", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	dead := valuesDead(t, dlq)
	for off, reason := range dead {
		t.Errorf("offset %d is a dead letter (%s); want a row: a double column takes any JSON integer", off, reason)
	}
	if a := valuesScan(t, tbl, "a"); a[1] != 1e20 {
		t.Errorf("a at offset 1 = %v, want 1e20", a[1])
	}
}

// TestReviewValuesJSONFractionRoundedIntoLongColumn: docs/typed-tables.md,
// schemaless JSON: integer first ({"a":1} then {"a":1.5}) makes a long,
// "and every later fraction in it is a schema conflict, a dead letter".
// integralAs converts a number written with a fraction into integer form
// when big.Float at its default 64-bit precision says it is an integer,
// so a fraction that needs more than 64 bits is rounded first:
// 1.00000000000000000001 is stored as 1 and 4611686018427387903.9 as
// 4611686018427387904 in the long column, different values than written,
// without a dead letter. Expected: both are dead letters (a fraction in a
// long column), as 1.5 is.
func TestReviewValuesJSONFractionRoundedIntoLongColumn(t *testing.T) {
	e := newEnv(t)
	e.Topic("frac", 1, nil)
	tbl, dlq := e.TypedTable("lake.frac", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(jsonRecords("frac", 0,
		`{"n":1}`,
		`{"n":1.5}`,
		`{"n":1.00000000000000000001}`,
		`{"n":4611686018427387903.9}`,
		`{"n":2.0}`,
	))
	if _, err := e.sink(tbl, connector.Config{Topic: "frac", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	n := valuesScan(t, tbl, "n")
	dead := valuesDead(t, dlq)
	if _, ok := dead[1]; !ok {
		t.Fatalf("1.5 in the long column is not a dead letter: %v", n[1])
	}
	for _, off := range []int64{2, 3} {
		if _, ok := dead[off]; !ok {
			t.Errorf("offset %d: a fraction stored in the long column as %v, want a dead letter (schema conflict)", off, n[off])
		}
	}
	if n[4] != int64(2) {
		t.Errorf("2.0 in the long column: %v, want 2", n[4])
	}
}

// valuesEvent is a Debezium change event (op c) in the JsonConverter's
// schema wrapper, of a row {id int32, x: a field of the Connect schema
// given}, keyed by id.
func valuesEvent(topic string, id int, xSchema, xValue string) *kgo.Record {
	after := fmt.Sprintf(`{"type":"struct","optional":true,"name":"dbserver1.inventory.t.Value","field":"%%s","fields":[{"field":"id","type":"int32","optional":false},{"field":"x","optional":true,%s}]}`, xSchema)
	schema := fmt.Sprintf(`{"type":"struct","name":"dbserver1.inventory.t.Envelope","optional":false,"fields":[%s,%s,{"field":"source","type":"struct","optional":false,"fields":[{"field":"ts_ms","type":"int64","optional":false}]},{"field":"op","type":"string","optional":false},{"field":"ts_ms","type":"int64","optional":true}]}`,
		fmt.Sprintf(after, "before"), fmt.Sprintf(after, "after"))
	payload := fmt.Sprintf(`{"before":null,"after":{"id":%d,"x":%s},"source":{"ts_ms":1796000000000},"op":"c","ts_ms":1796000000100}`, id, xValue)
	key := fmt.Sprintf(`{"schema":{"type":"struct","name":"dbserver1.inventory.t.Key","optional":false,"fields":[{"field":"id","type":"int32","optional":false}]},"payload":{"id":%d}}`, id)
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(fmt.Sprintf(`{"schema":%s,"payload":%s}`, schema, payload))}
}

// sinkConnect sinks recs (Debezium events in the JsonConverter's wrapper)
// into a new Debezium table and returns column x by id and the dead
// letters by offset.
func sinkConnect(t *testing.T, name string, recs []*kgo.Record) (x map[int64]any, dead map[int64]string) {
	e := newEnv(t)
	e.Topic(name, 1, nil)
	for _, r := range recs {
		r.Topic = name
	}
	e.Produce(recs)
	tbl, dlq := e.debeziumTable("lake."+name, floetest.CDCConnectJSON)
	if _, err := e.sink(tbl, connector.Config{Topic: name, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	return valuesScan(t, tbl, "x"), valuesDead(t, dlq)
}

// TestReviewValuesDebeziumTimeOutOfDay: io.debezium.time.MicroTime (and Time,
// NanoTime, org.apache.kafka.connect.data.Time) become an Iceberg time
// (docs/upsert.md), which the Iceberg spec defines as a time of day,
// microseconds since midnight. Debezium's MySQL connector maps TIME
// columns, whose range is -838:59:59..838:59:59, to MicroTime and writes
// such values as they are (Debezium docs, "Temporal types": "TIME values
// ... can be negative or greater than 24 hours"); PostgreSQL's time
// takes 24:00:00. floe stores them as they come: -01:00:00 as -3.6e9 µs
// and 25:00:00 as 9e10 µs, values no Iceberg time can be, which readers
// show as other times of day or reject. The Avro path refuses them ("a
// value outside [0, 24 h) is a decode error", docs/typed-tables.md), the
// Connect path does not. Expected: no row holds a time outside
// [0, 24 h); such a record is a dead letter naming the field.
func TestReviewValuesDebeziumTimeOutOfDay(t *testing.T) {
	const day = int64(86_400_000_000)
	micro := `"type":"int64","name":"io.debezium.time.MicroTime"`
	milli := `"type":"int32","name":"io.debezium.time.Time"`
	x, dead := sinkConnect(t, "times", []*kgo.Record{
		valuesEvent("", 1, micro, "3600000000"),  // 01:00:00
		valuesEvent("", 2, micro, "-3600000000"), // MySQL TIME '-01:00:00'
		valuesEvent("", 3, micro, "90000000000"), // MySQL TIME '25:00:00'
		valuesEvent("", 4, milli, "-1000"),       // -00:00:01 in ms
		valuesEvent("", 5, micro, "86400000000"), // PostgreSQL '24:00:00'
	})
	if x[0] != int64(3_600_000_000) {
		t.Fatalf("01:00:00 stored as %v", x[0])
	}
	for off := int64(1); off <= 4; off++ {
		v, isRow := x[off]
		if _, isDead := dead[off]; isDead {
			continue
		}
		if us, ok := v.(int64); isRow && ok && (us < 0 || us >= day) {
			t.Errorf("offset %d: stored the time %d µs, outside [0, 24 h): not an Iceberg time of day; want a dead letter", off, us)
		}
	}
}

// TestReviewValuesDebeziumNanoTimestampBeforeEpoch: io.debezium.time.
// NanoTimestamp becomes a timestamp in microseconds, "below a microsecond,
// nanoseconds are truncated" (docs/upsert.md). Truncating a time drops the
// digits below the microsecond: 1969-12-31T23:59:59.9999985 is
// ...59.999998 (-2 µs), as Avro's, Iceberg's and Java's Instant
// truncatedTo(MICROS) give, and as floe does for instants after 1970
// (1500 ns is 1 µs). floe divides with Go's /, which rounds toward zero,
// so every timestamp before 1970 with a sub-microsecond part is stored one
// microsecond late: -1500 ns becomes -1 µs (...59.999999). Expected -2.
func TestReviewValuesDebeziumNanoTimestampBeforeEpoch(t *testing.T) {
	nano := `"type":"int64","name":"io.debezium.time.NanoTimestamp"`
	x, dead := sinkConnect(t, "nanots", []*kgo.Record{
		valuesEvent("", 1, nano, "1500"),
		valuesEvent("", 2, nano, "-1500"),
		valuesEvent("", 3, nano, "-86399999999500"), // 1969-12-31T00:00:00.0000005
	})
	if len(dead) > 0 {
		t.Fatalf("dead letters: %v", dead)
	}
	for off, want := range map[int64]int64{0: 1, 1: -2, 2: -86_400_000_000} {
		if x[off] != want {
			t.Errorf("offset %d: stored %v µs, want %d (nanoseconds truncated toward the past)", off, x[off], want)
		}
	}
}

// TestReviewValuesDebeziumConnectTimestampOverflow: a Connect Timestamp
// (org.apache.kafka.connect.data.Timestamp, ms since the epoch; also
// io.debezium.time.Timestamp) is multiplied by 1000 into microseconds
// without a range check, so a value beyond ±2^63 µs wraps around: 9.22e15
// ms (year ~294,000) is stored as a timestamp in the year -290,308. The
// Avro path refuses the same value ("timestamp ... ms is out of range",
// millisToMicros). Expected: a dead letter, never a wrapped value.
func TestReviewValuesDebeziumConnectTimestampOverflow(t *testing.T) {
	ts := `"type":"int64","name":"org.apache.kafka.connect.data.Timestamp"`
	x, dead := sinkConnect(t, "tsover", []*kgo.Record{
		valuesEvent("", 1, ts, "1796000000000"),
		valuesEvent("", 2, ts, "9223372036854776"),
		valuesEvent("", 3, ts, "-9223372036854776"),
	})
	if x[0] != int64(1796000000000000) {
		t.Fatalf("offset 0: %v", x[0])
	}
	for _, off := range []int64{1, 2} {
		if _, isDead := dead[off]; !isDead {
			t.Errorf("offset %d: a timestamp beyond Iceberg's range stored as %v µs (wrapped), want a dead letter", off, x[off])
		}
	}
}

// TestReviewValuesDebeziumDeleteWithOddBeforeImage: docs/upsert.md: "op d
// (delete): the key's row is deleted"; the before image is only where the
// key comes from when the record has none. With the JsonConverter without
// schemas (schemas.enable=false), floe types the whole before image
// against the table's columns, so a delete whose record has its key but
// whose before image holds a value the column cannot take (here price 2.5
// in the long column price, the value of an update that was itself a
// dead letter) is a dead letter: the row stays in the table although the
// source deleted it (Debezium with tombstones.on.delete=false writes no
// tombstone to delete it again). Expected: the delete applies; the table
// holds no row for id 1.
func TestReviewValuesDebeziumDeleteWithOddBeforeImage(t *testing.T) {
	e := newEnv(t)
	const topic = "plain"
	e.Topic(topic, 1, nil)
	ev := func(op, before, after string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(`{"id":1}`),
			Value: fmt.Appendf(nil, `{"before":%s,"after":%s,"source":{"ts_ms":1796000000000},"op":%q,"ts_ms":1796000000100}`, before, after, op)}
	}
	e.Produce([]*kgo.Record{
		ev("c", `null`, `{"id":1,"price":2}`),
		ev("u", `{"id":1,"price":2}`, `{"id":1,"price":2.5}`), // a schema conflict: a dead letter, as documented
		ev("d", `{"id":1,"price":2.5}`, `null`),
	})
	tbl, dlq := e.debeziumTable("lake.plain", floetest.CDCPlainJSON)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	dead := valuesDead(t, dlq)
	if _, ok := dead[1]; !ok {
		t.Fatalf("the update with a fraction in a long column is not a dead letter: %v", dead)
	}
	if reason, ok := dead[2]; ok {
		t.Errorf("the delete is a dead letter (%s); want it applied: the record has its key", reason)
	}
	if got := rows(t, tbl); len(got) != 0 {
		t.Errorf("%d rows after the delete of the only key, want none: %v", len(got), got[0].Columns)
	}
}

// TestReviewValuesJSONSchemaDateTimeRFC3339: JSON Schema's format "date-time"
// is RFC 3339's date-time (JSON Schema validation §7.3.1), and
// docs/typed-tables.md says "RFC 3339, converted to UTC". RFC 3339 §5.6:
// "the "T" and "Z" characters in this syntax may alternatively be lower
// case"; its time-second is 00-60 (a leap second); JSON Schema's own test
// suite counts "1963-06-19t08:30:06.283185z" and "1998-12-31T23:59:60Z"
// valid. floe parses with Go's time.RFC3339 layout, which refuses both, so
// these records are dead letters. Expected: rows (the leap second as
// 23:59:59.999999 or the next second, as Java's OffsetDateTime and most
// readers do; the lower-case one exactly).
func TestReviewValuesJSONSchemaDateTimeRFC3339(t *testing.T) {
	e := newEnv(t)
	e.Topic("dt", 1, nil)
	id := register(t, e.Stack.Registry, "dt-value", sr.Schema{Type: sr.TypeJSON,
		Schema: `{"type":"object","properties":{"ts":{"type":"string","format":"date-time"}}}`})
	e.Produce([]*kgo.Record{
		{Topic: "dt", Value: localstack.WireFormat(id, nil, []byte(`{"ts":"1963-06-19T08:30:06.283185Z"}`))},
		{Topic: "dt", Value: localstack.WireFormat(id, nil, []byte(`{"ts":"1963-06-19t08:30:06.283185z"}`))},
		{Topic: "dt", Value: localstack.WireFormat(id, nil, []byte(`{"ts":"1998-12-31T23:59:60Z"}`))},
	})
	tbl, dlq := sinkRegistryTopic(t, e, "dt")
	for off, reason := range valuesDead(t, dlq) {
		t.Errorf("offset %d: a dead letter (%s), want a row: an RFC 3339 date-time", off, reason)
	}
	ts := valuesScan(t, tbl, "ts")
	if ts[1] != nil && ts[1] != ts[0] {
		t.Errorf("lower-case t and z: %v, want %v", ts[1], ts[0])
	}
}

// TestReviewValuesHoldsAvroLogicalTypes: Avro decimals (bytes and fixed,
// negative, a scale) and times and timestamps before 1970, a union with
// null last and a union of several types: what iceberg-go's scan reads is
// what the producer wrote. Held.
func TestReviewValuesHoldsAvroLogicalTypes(t *testing.T) {
	e := newEnv(t)
	e.Topic("lt", 1, nil)
	id := register(t, e.Stack.Registry, "lt-value", sr.Schema{Schema: `{"type":"record","name":"R","fields":[
		{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
		{"name":"f","type":{"type":"fixed","name":"F","size":5,"logicalType":"decimal","precision":11,"scale":3}},
		{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
		{"name":"dt","type":{"type":"int","logicalType":"date"}},
		{"name":"n","type":["long","null"]},
		{"name":"u","type":["null","string","long"]}]}`})
	payload := func(dUnscaled int64, ts int64, n *int64, u any) []byte {
		b := avroBytesDec(nil, dUnscaled)
		fx := make([]byte, 5)
		neg := int64(-123456) // -123.456
		v := uint64(neg)
		for i := 4; i >= 0; i-- {
			fx[i] = byte(v)
			v >>= 8
		}
		b = append(b, fx...)
		b = avroLong(b, ts)
		b = avroLong(b, 3_723_004) // 01:02:03.004
		b = avroLong(b, -1)        // 1969-12-31
		if n == nil {
			b = avroLong(b, 1)
		} else {
			b = avroLong(avroLong(b, 0), *n)
		}
		switch u := u.(type) {
		case nil:
			b = avroLong(b, 0)
		case string:
			b = avroString(avroLong(b, 1), u)
		case int64:
			b = avroLong(avroLong(b, 2), u)
		}
		return b
	}
	seven := int64(7)
	e.Produce([]*kgo.Record{
		{Topic: "lt", Value: localstack.WireFormat(id, nil, payload(-12345, -1, &seven, "x"))},
		{Topic: "lt", Value: localstack.WireFormat(id, nil, payload(99, 1796000000123, nil, int64(-5)))},
	})
	tbl, dlq := sinkRegistryTopic(t, e, "lt")
	if dead := valuesDead(t, dlq); len(dead) > 0 {
		t.Fatalf("dead letters: %v", dead)
	}
	want := map[string][2]any{
		"d":  {"-123.45", "0.99"},
		"f":  {"-123.456", "-123.456"},
		"ts": {int64(-1000), int64(1796000000123000)},
		"tm": {int64(3_723_004_000), int64(3_723_004_000)},
		"n":  {int64(7), nil},
	}
	for col, w := range want {
		got := valuesScan(t, tbl, col)
		for off := range 2 {
			if fmt.Sprint(got[int64(off)]) != fmt.Sprint(w[off]) {
				t.Errorf("%s at %d: %v, want %v", col, off, got[int64(off)], w[off])
			}
		}
	}
	if u := valuesScan(t, tbl, "u"); !strings.Contains(fmt.Sprint(u[0]), `"string":"x"`) || !strings.Contains(fmt.Sprint(u[1]), `"long":-5`) {
		t.Errorf("union: %v", u)
	}
	if dt := valuesScan(t, tbl, "dt"); dt[0] != "1969-12-31" {
		t.Errorf("date: %v", dt[0])
	}
}

// avroBytesDec appends an Avro bytes decimal of the unscaled value v
// (minimal two's complement).
func avroBytesDec(b []byte, v int64) []byte {
	var out []byte
	for {
		out = append([]byte{byte(v)}, out...)
		if (v >= -128 && v < 128) || len(out) == 8 {
			break
		}
		v >>= 8
	}
	return append(avroLong(b, int64(len(out))), out...)
}

// TestReviewValuesHoldsJSONBigIntegersInLongColumn: schemaless JSON integers up
// to 2^63-1 keep every digit in a long column (no detour through float64),
// and a negative zero and 1e3 written as integer forms are held. Held.
func TestReviewValuesHoldsJSONBigIntegersInLongColumn(t *testing.T) {
	e := newEnv(t)
	e.Topic("ints", 1, nil)
	tbl, dlq := e.TypedTable("lake.ints", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(jsonRecords("ints", 0, `{"n":9007199254740993}`, `{"n":9223372036854775807}`, `{"n":-9223372036854775808}`, `{"n":1e3}`))
	if _, err := e.sink(tbl, connector.Config{Topic: "ints", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	n := valuesScan(t, tbl, "n")
	for off, want := range map[int64]int64{0: 9007199254740993, 1: math.MaxInt64, 2: math.MinInt64, 3: 1000} {
		if n[off] != want {
			t.Errorf("offset %d: %v, want %d (dead: %v)", off, n[off], want, valuesDead(t, dlq)[off])
		}
	}
}

// TestReviewValuesProtobufExplicitMapEntrySchema: Confluent Schema Registry
// stores the schema a Java (or .NET) KafkaProtobufSerializer registers
// from a generated class as the text of its descriptor, and until
// confluentinc/schema-registry#3444 (merged 2024-11-25; schemas stored
// before stay as they are, and Karapace still does so for binary-registered
// schemas, Aiven-Open/karapace#1319) that text spells a map field as its
// synthetic entry message: `repeated LabelsEntry labels = 2;` and a nested
// `message LabelsEntry { option map_entry = true; string key = 1; string
// value = 2; }`. On the wire that is exactly a map<string, string>.
// protocompile refuses the text ("map_entry option should not be set
// explicitly; use map type instead"), so the codec is a schema error and
// every record written with such a schema, from a serializer
// docs/typed-tables.md says floe reads, is a dead letter. Expected: a row,
// labels a map<string, string> (or a list of key/value structs) holding
// {"a": "1"}, and inner.x = 5.
func TestReviewValuesProtobufExplicitMapEntrySchema(t *testing.T) {
	e := newEnv(t)
	e.Topic("pbmap", 1, nil)
	id := register(t, e.Stack.Registry, "pbmap-value", sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package acme;

message Order {
  string id = 1;
  repeated LabelsEntry labels = 2;
  Inner inner = 3;

  message LabelsEntry {
    option map_entry = true;
  
    string key = 1;
    string value = 2;
  }
  message Inner {
    int32 x = 1;
  }
}
`})
	// Order{id: "o1", labels: {"a": "1"}, inner: {x: 5}}
	payload := []byte{0x0a, 2, 'o', '1', 0x12, 6, 0x0a, 1, 'a', 0x12, 1, '1', 0x1a, 2, 0x08, 5}
	e.Produce([]*kgo.Record{{Topic: "pbmap", Value: localstack.WireFormat(id, []int{0}, payload)}})
	tbl, dlq := sinkRegistryTopic(t, e, "pbmap")
	for off, reason := range valuesDead(t, dlq) {
		t.Errorf("offset %d: a dead letter (%s), want a row: the schema Confluent's serializer registered for a message with a map field", off, reason)
	}
	if got := fmt.Sprint(valuesScan(t, tbl, "labels")[0]); !strings.Contains(got, "a") || !strings.Contains(got, "1") {
		t.Errorf("labels: %s, want {a: 1}", got)
	}
}

// TestReviewValuesProtobufNestedIndexAfterMapField: the Protobuf message
// indexes name the record's message within the schema. Confluent's Java
// serde computes and resolves them on the schema's parsed elements
// (ProtobufSchema.toMessageIndexes / toMessageName), where a map field is
// a field, not a nested message; with normalize.schemas=true the
// serializer skips synthetic map entries explicitly ("Skip map entries if
// normalizing"), and its deserializer resolves indexes on the registry's
// text, where `map<string, string> labels` declares no message. So for
//
//	message Order { map<string, string> labels = 1; message Inner { int32 x = 1; } Inner inner = 2; }
//
// a record of Order.Inner carries the indexes [0, 0]. floe counts the
// descriptor's synthetic LabelsEntry first (docs/typed-tables.md: "map entry
// messages included"), reads [0, 0] as Order.LabelsEntry, and the Inner
// payload (field 1 a varint, where LabelsEntry's field 1 is a string) is
// unmarshalled with its field as unknown: a row with key "" and value "",
// columns the producer's message does not have, and x lost, without a dead
// letter. Expected: the row holds x = 5 (and no key/value columns), as
// Confluent's own deserializer reads it; at the least a dead letter, never
// a row of another message.
func TestReviewValuesProtobufNestedIndexAfterMapField(t *testing.T) {
	e := newEnv(t)
	e.Topic("pbidx", 1, nil)
	id := register(t, e.Stack.Registry, "pbidx-value", sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package acme;

message Order {
  map<string, string> labels = 1;
  message Inner {
    int32 x = 1;
  }
  Inner inner = 2;
}
`})
	// Order.Inner{x: 5}, framed as Confluent's serde frames it: [0, 0]
	e.Produce([]*kgo.Record{{Topic: "pbidx", Value: localstack.WireFormat(id, []int{0, 0}, []byte{0x08, 5})}})
	tbl, dlq := sinkRegistryTopic(t, e, "pbidx")
	var cols []string
	for _, f := range tbl.Iceberg().Schema().Fields() {
		cols = append(cols, f.Name+" "+f.Type.String())
	}
	if x := valuesScan(t, tbl, "x")[0]; x != "5" && x != int64(5) {
		t.Errorf("x = %v (columns %v, dead letters %v); want 5: the record is an Order.Inner", x, cols, valuesDead(t, dlq))
	}
}

// TestReviewValuesHoldsProtobufFields: a oneof, an enum number the schema does
// not name, a wrapper, proto3 optional zero against absent, a
// google.protobuf.Timestamp before 1970 with nanoseconds, a uint64 beyond
// 2^63 and a map sorted by key: what the scan reads is what was written.
// Held.
func TestReviewValuesHoldsProtobufFields(t *testing.T) {
	e := newEnv(t)
	e.Topic("pbf", 1, nil)
	id := register(t, e.Stack.Registry, "pbf-value", sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package acme;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

enum Color { RED = 0; GREEN = 1; }
message M {
  oneof pick { string s = 1; int64 n = 2; }
  Color color = 3;
  google.protobuf.Int32Value w = 4;
  optional int32 o = 5;
  google.protobuf.Timestamp ts = 6;
  uint64 u = 7;
  map<int32, string> m = 8;
}
`})
	// {n: 7, color: 9, w: {}, o: 0, ts: {seconds: -1, nanos: 500000999}, u: 2^64-1, m: {3: "c", -1: "a"}}
	var p []byte
	p = protowire.AppendVarint(protowire.AppendTag(p, 2, protowire.VarintType), 7)
	p = protowire.AppendVarint(protowire.AppendTag(p, 3, protowire.VarintType), 9)
	p = protowire.AppendBytes(protowire.AppendTag(p, 4, protowire.BytesType), nil)
	p = protowire.AppendVarint(protowire.AppendTag(p, 5, protowire.VarintType), 0)
	var ts []byte
	ts = protowire.AppendVarint(protowire.AppendTag(ts, 1, protowire.VarintType), uint64(1<<64-1)) // -1
	ts = protowire.AppendVarint(protowire.AppendTag(ts, 2, protowire.VarintType), 500000999)
	p = protowire.AppendBytes(protowire.AppendTag(p, 6, protowire.BytesType), ts)
	p = protowire.AppendVarint(protowire.AppendTag(p, 7, protowire.VarintType), 1<<64-1)
	for _, kv := range []struct {
		k int32
		v string
	}{{3, "c"}, {-1, "a"}} {
		var en []byte
		en = protowire.AppendVarint(protowire.AppendTag(en, 1, protowire.VarintType), uint64(int64(kv.k)))
		en = protowire.AppendString(protowire.AppendTag(en, 2, protowire.BytesType), kv.v)
		p = protowire.AppendBytes(protowire.AppendTag(p, 8, protowire.BytesType), en)
	}
	e.Produce([]*kgo.Record{
		{Topic: "pbf", Value: localstack.WireFormat(id, []int{0}, p)},
		{Topic: "pbf", Value: localstack.WireFormat(id, []int{0}, []byte{0x0a, 1, 'x'})},
	})
	tbl, dlq := sinkRegistryTopic(t, e, "pbf")
	if dead := valuesDead(t, dlq); len(dead) > 0 {
		t.Fatalf("dead letters: %v", dead)
	}
	want := map[string][2]any{
		"s":     {nil, "x"},
		"n":     {int64(7), nil},
		"color": {"9", "RED"},
		"w":     {"0", nil},
		"o":     {"0", nil},
		"ts":    {int64(-500_000), nil}, // 1969-12-31T23:59:59.500000999Z truncated
		"u":     {"18446744073709551615", "0"},
		"m":     {`[{"key":-1,"value":"a"},{"key":3,"value":"c"}]`, "[]"},
	}
	for col, w := range want {
		got := valuesScan(t, tbl, col)
		for off := range 2 {
			if fmt.Sprint(got[int64(off)]) != fmt.Sprint(w[off]) {
				t.Errorf("%s at %d: %v, want %v", col, off, got[int64(off)], w[off])
			}
		}
	}
}

// TestReviewValuesHoldsDebeziumConnectTypes: Connect Decimal (base64 two's
// complement, negative; and a NUMERIC number), io.debezium.time.Date before
// 1970, ZonedTimestamp with an offset and nanoseconds, MicroTimestamp before
// 1970: the scan reads what Debezium meant. Held.
func TestReviewValuesHoldsDebeziumConnectTypes(t *testing.T) {
	dec := `"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2","connect.decimal.precision":"10"}`
	x, dead := sinkConnect(t, "cdec", []*kgo.Record{
		valuesEvent("", 1, dec, `"/4U="`), // 0xff85 = -123 -> -1.23
		valuesEvent("", 2, dec, `-12345.67`),
	})
	if len(dead) > 0 || fmt.Sprint(x[0]) != "-1.23" || fmt.Sprint(x[1]) != "-12345.67" {
		t.Errorf("decimals %v, dead %v", x, dead)
	}
	zoned := `"type":"string","name":"io.debezium.time.ZonedTimestamp"`
	x, dead = sinkConnect(t, "czoned", []*kgo.Record{
		valuesEvent("", 1, zoned, `"2024-03-01T01:30:00.123456789+02:00"`),
	})
	if len(dead) > 0 || x[0] != int64(1709249400123456) {
		t.Errorf("zoned %v, dead %v", x, dead)
	}
	date := `"type":"int32","name":"io.debezium.time.Date"`
	x, dead = sinkConnect(t, "cdate", []*kgo.Record{valuesEvent("", 1, date, `-1`)})
	if len(dead) > 0 || x[0] != "1969-12-31" {
		t.Errorf("date %v, dead %v", x, dead)
	}
	micro := `"type":"int64","name":"io.debezium.time.MicroTimestamp"`
	x, dead = sinkConnect(t, "cmicro", []*kgo.Record{valuesEvent("", 1, micro, `-1`)})
	if len(dead) > 0 || x[0] != int64(-1) {
		t.Errorf("micro %v, dead %v", x, dead)
	}
}

// TestReviewValuesJSONIntegersAndFractionsInListOfObjects: docs/typed-tables.md,
// schemaless JSON: a column that holds doubles takes integers ("fraction
// first ... integers go in as doubles (JSON does not tell 1 from 1.0), with
// no dead letter"), and "Within one record the kinds meet first: [1, 2.5]
// is list<double>". widenInferred applies that only to a list's direct
// elements; objects or lists inside a list are merged with MergeType, which
// refuses long and double either way. So {"items":[{"price":10},{"price":
// 9.99}]} (a whole-number price, as JavaScript writes 10.0) is a dead letter
// even when items.element.price is already a double column, and so is
// [{"price":9.99},{"price":10}] (fraction first) and [[2.5],[1]]: ordinary
// order lines, dead-lettered while the same values one record each are
// rows. Expected: rows, price a double (10 read as 10.0).
func TestReviewValuesJSONIntegersAndFractionsInListOfObjects(t *testing.T) {
	e := newEnv(t)
	e.Topic("lines", 1, nil)
	tbl, dlq := e.TypedTable("lake.lines", mapping.Layout{Value: mapping.ValueJSON})
	e.Produce(jsonRecords("lines", 0,
		`{"items":[{"price":9.99}],"m":[[2.5]]}`,
		`{"items":[{"price":10}]}`,
		`{"items":[{"price":10},{"price":9.99}]}`,
		`{"items":[{"price":9.99},{"price":10}]}`,
		`{"m":[[2.5],[1]]}`,
	))
	if _, err := e.sink(tbl, connector.Config{Topic: "lines", StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	dead := valuesDead(t, dlq)
	if _, ok := dead[1]; ok {
		t.Fatalf("even one record per kind is a dead letter: %v", dead)
	}
	for _, off := range []int64{2, 3, 4} {
		if reason, ok := dead[off]; ok {
			t.Errorf("offset %d: a dead letter (%s); want a row: the column is double and takes integers", off, reason)
		}
	}
}

// TestReviewValuesJSONDottedNameStopsTheSink: a JSON field whose name holds a
// dot ("a.b", which floe takes as a column: TestReviewJSONOddFieldNames)
// beside, or after, a struct field a with a field b. Iceberg schemas index
// fields by their dotted full names, so the schema change floe stages has
// two fields named a.b, and iceberg-go refuses it ("invalid schema:
// multiple fields for name a.b"). The error is not a dead letter: the sink
// stops with exit 2, and every run stops again at the same record, so one
// producer record halts the table for good (docs/typed-tables.md: a record
// that cannot become a row goes to the dead-letter table, with the
// reason). The same happens to any JSON table for a single record
// {"kafka_headers.key": 1}, which names a field of floe's own
// kafka_headers column (the reserved-name check compares whole names
// only), and to a JSON Schema declaring both properties. Expected: the run
// ends without error; the record that would make the clash is a dead
// letter naming the field; the records around it are rows.
func TestReviewValuesJSONDottedNameStopsTheSink(t *testing.T) {
	for name, vals := range map[string][]string{
		"one-record":  {`{"x":0}`, `{"a.b":1,"a":{"b":2}}`, `{"x":2}`},
		"two-records": {`{"a":{"b":2}}`, `{"a.b":1}`, `{"x":2}`},
		// floe's own kafka_headers list<struct<key, value>>: its element's
		// field resolves as kafka_headers.key (the error then even blames
		// "another writer changed the schema under this flush")
		"headers": {`{"x":0}`, `{"kafka_headers.key":1}`, `{"x":2}`},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.Topic("dots", 1, nil)
			tbl, dlq := e.TypedTable("lake.dots", mapping.Layout{Value: mapping.ValueJSON})
			e.Produce(jsonRecords("dots", 0, vals...))
			for run := range 2 {
				if _, err := e.sink(tbl, connector.Config{Topic: "dots", StopAtEnd: true, DeadLetters: dlq}); err != nil {
					t.Fatalf("run %d stops: %v", run, err)
				}
			}
			floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{{Topic: "dots"}: 3})
			if _, ok := valuesDead(t, dlq)[1]; !ok {
				t.Errorf("offset 1 is not a dead letter")
			}
		})
	}
}
