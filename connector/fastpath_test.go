package connector_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// fastPathOrder is an Avro record with a field of every type of the
// README's Avro mapping; %s are the types that version 2 widens (id,
// price, amount) and the fields it adds.
const fastPathOrder = `{"type":"record","name":"Order","namespace":"fast","fields":[
  {"name":"id","type":"%s"},
  {"name":"price","type":"%s"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":%d,"scale":2}},
  {"name":"name","type":"string"},
  {"name":"ok","type":"boolean"},
  {"name":"big","type":"long"},
  {"name":"d","type":"double"},
  {"name":"raw","type":"bytes"},
  {"name":"fx","type":{"type":"fixed","name":"F4","size":4}},
  {"name":"dfx","type":{"type":"fixed","name":"D8","size":8,"logicalType":"decimal","precision":16,"scale":3}},
  {"name":"color","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"t_ms","type":{"type":"int","logicalType":"time-millis"}},
  {"name":"t_us","type":{"type":"long","logicalType":"time-micros"}},
  {"name":"ts_ms","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"ts_us","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"lts_ms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
  {"name":"lts_us","type":{"type":"long","logicalType":"local-timestamp-micros"}},
  {"name":"uid","type":{"type":"string","logicalType":"uuid"}},
  {"name":"dur","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}},
  {"name":"note","type":["null","string"]},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"attrs","type":{"type":"map","values":["null","int"]}},
  {"name":"inner","type":{"type":"record","name":"Inner","fields":[{"name":"a","type":"int"},{"name":"b","type":["null","string"]}]}},
  {"name":"opt_inner","type":["null","Inner"]},
  {"name":"items","type":{"type":"array","items":"Inner"}},
  {"name":"choice","type":["null","int","string","Inner"]}%s]}`

// fastPathValue is record i of version v of fastPathOrder, for hamba to
// marshal: values across the types, nulls in every nullable place, each
// branch of the union.
func fastPathValue(v, i int) map[string]any {
	var note, optInner any
	if i%3 != 0 {
		note = fmt.Sprintf("note ü %d", i)
		optInner = map[string]any{"fast.Inner": map[string]any{"a": i, "b": nil}}
	}
	choices := []any{nil, map[string]any{"int": i}, map[string]any{"string": fmt.Sprint("s", i)},
		map[string]any{"fast.Inner": map[string]any{"a": -i, "b": "in"}}}
	at := time.Date(2024, 5, 17, 13, 45, 30, 123456000, time.UTC).Add(time.Duration(i) * time.Hour)
	m := map[string]any{
		"price": float32(i) + 0.25, "amount": big.NewRat(int64(i*1001-5000), 100), "name": fmt.Sprintf("name-%d", i),
		"ok": i%2 == 0, "big": int64(i) << 40, "d": float64(i) / 7, "raw": []byte{byte(i), 0, 255}, "fx": [4]byte{1, 2, 3, byte(i)},
		"dfx": big.NewRat(int64(-i*123457), 1000), "color": []string{"RED", "GREEN", "BLUE"}[i%3],
		"day": at.Truncate(24 * time.Hour), "t_ms": time.Duration(i) * time.Minute, "t_us": time.Duration(i)*time.Second + time.Microsecond,
		"ts_ms": at, "ts_us": at, "lts_ms": at, "lts_us": at, "uid": fmt.Sprintf("3f6a9a0e-6a52-4a7e-9f8e-%012d", i),
		"dur": avro.LogicalDuration{Months: uint32(i), Days: 2, Milliseconds: 3}, "note": note,
		"tags": make([]string, i%4), "attrs": map[string]any{"k": i, "nil": nil}, "inner": map[string]any{"a": i, "b": note},
		"opt_inner": optInner, "items": make([]map[string]any, i%3), "choice": choices[i%4],
	}
	for j := range m["tags"].([]string) {
		m["tags"].([]string)[j] = fmt.Sprint("t", j)
	}
	for j := range m["items"].([]map[string]any) {
		m["items"].([]map[string]any)[j] = map[string]any{"a": j, "b": nil}
	}
	if v == 1 {
		m["id"] = int32(i)
	} else {
		m["id"], m["price"], m["added"] = int64(i), float64(i)+0.5, fmt.Sprint("added ", i)
	}
	return m
}

// TestAvroFastPathMatchesContentAudit sinks Avro records of every mapped
// type, in two schema versions (the second adds a field and widens three)
// and the first again, with a tombstone and dead letters among them, over
// several flushes: the sink decodes them on its fast path (a tape appended
// to the builders), and the content audit, which decodes each record into
// Go values and builds its row the slow way, finds every row identical.
func TestAvroFastPathMatchesContentAudit(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	versions := []string{
		fmt.Sprintf(fastPathOrder, "int", "float", 9, ""),
		fmt.Sprintf(fastPathOrder, "long", "double", 12, `,{"name":"added","type":["null","string"],"default":null}`),
	}
	ids := make([]int, len(versions))
	for v, text := range versions {
		ids[v] = register(t, e.Stack.Registry, "orders-value", sr.Schema{Schema: text})
	}
	var recs []*kgo.Record
	rows := 0
	// Version 1 again after version 2: its values go into the widened
	// columns.
	for _, v := range []int{0, 1, 0} {
		id, schema := ids[v], avro.MustParse(versions[v])
		for i := range 30 {
			payload, err := avro.Marshal(schema, fastPathValue(v+1, i))
			if err != nil {
				t.Fatalf("version %d record %d: %v", v+1, i, err)
			}
			recs = append(recs, &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: localstack.WireFormat(id, nil, payload)})
			rows++
		}
		// A payload cut short is a dead letter; a tombstone is a row.
		cut := recs[len(recs)-1].Value
		recs = append(recs, &kgo.Record{Topic: "orders", Value: cut[:len(cut)-3]}, &kgo.Record{Topic: "orders", Key: []byte("gone")})
		rows++
	}
	e.Produce(recs)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueRegistry, Key: mapping.KeyString})
	stats, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, FlushRecords: 7, DeadLetters: dlq, Registry: e.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != int64(rows) || stats.DeadLetters != 3 {
		t.Fatalf("%d rows, %d dead letters; want %d and 3", stats.Records, stats.DeadLetters, rows)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true, Registry: e.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("finding: %+v", f)
	}
	if c := rep.Partitions[0].Content; c == nil || c.Verified != int64(rows) || c.DeadLetters != 3 {
		t.Fatalf("content: %+v; want %d rows and 3 dead letters verified", c, rows)
	}
}
