package connector_test

import (
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

// TestWhereKeyTypedColumns: floe where --key of an upsert table keyed by
// its key's fields of types given as text: uuid, date, time, timestamp,
// timestamptz and decimal (Avro logical types through the registry, as
// Debezium's and other producers' keys have them). --key refused every
// such key, naming the column ("which --key cannot give yet"). A key is
// found in whatever form its values are given (an upper-case UUID, a date
// as days, an offset instead of Z, a decimal as a JSON number); a decimal
// with more digits after the point than the column's scale is refused,
// not rounded into another key.
func TestWhereKeyTypedColumns(t *testing.T) {
	e := newEnv(t)
	const topic = "typed-keys"
	e.Topic(topic, 1, nil)
	const keySchema = `{"type":"record","name":"K","fields":[
		{"name":"id","type":{"type":"string","logicalType":"uuid"}},
		{"name":"day","type":{"type":"int","logicalType":"date"}},
		{"name":"tod","type":{"type":"long","logicalType":"time-micros"}},
		{"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},
		{"name":"local","type":{"type":"long","logicalType":"local-timestamp-micros"}},
		{"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}}]}`
	id := register(t, e.Stack.Registry, topic+"-key", sr.Schema{Schema: keySchema})
	schema := avro.MustParse(keySchema)
	at := time.Date(2024, 1, 31, 8, 0, 0, 500_000_000, time.UTC)
	key := func(uid string, price string) []byte {
		p, _ := new(big.Rat).SetString(price)
		b, err := avro.Marshal(schema, map[string]any{"id": uid, "day": time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC),
			"tod": 10*time.Hour + 250*time.Millisecond, "at": at, "local": time.Date(2024, 1, 31, 10, 0, 0, 0, time.UTC), "price": p})
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, b...)
	}
	const one, two = "4f1c2a9e-0b7d-4c8e-9a51-3d2e6f7a8b90", "9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
	tomb := keyedRec(topic, key(two, "3.00"), "", 2)
	tomb.Value = nil
	e.Produce([]*kgo.Record{
		keyedRec(topic, key(one, "12.50"), `{"name":"one"}`, 0),
		keyedRec(topic, key(two, "3.00"), `{"name":"two"}`, 1),
		tomb,
	})
	tbl, dlq := e.TableWithDeadLetters("lake.typed_keys", keyFieldsOptions(t, mapping.KeyRegistry))
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, Registry: e.Registry()}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if got := tbl.Iceberg().Schema().String(); !strings.Contains(got, "id: optional uuid") || !strings.Contains(got, "price: optional decimal(10, 2)") {
		t.Fatalf("the key columns are not of the types the test is about:\n%s", got)
	}

	for _, c := range []struct{ key, status string }{
		{`{"id":"` + strings.ToUpper(one) + `","day":"2024-01-31","tod":"10:00:00.25","at":"2024-01-31T10:00:00.5+02:00","local":"2024-01-31T10:00:00","price":12.5}`, lookup.KeyStatusRow},
		{`{"id":"` + one + `","day":19753,"tod":"10:00:00.250000","at":"2024-01-31T08:00:00.500000Z","local":"2024-01-31T10:00:00.000","price":"12.50"}`, lookup.KeyStatusRow},
		{`{"id":"` + two + `","day":"2024-01-31","tod":"10:00:00.25","at":"2024-01-31T08:00:00.5Z","local":"2024-01-31T10:00:00","price":3}`, lookup.KeyStatusDeleted},
		{`{"id":"` + one + `","day":"2024-01-31","tod":"10:00:00.25","at":"2024-01-31T08:00:00.5Z","local":"2024-01-31T10:00:00","price":12.51}`, lookup.KeyStatusNeverSeen},
		{`{"id":"` + one + `","day":"2024-01-30","tod":"10:00:00.25","at":"2024-01-31T08:00:00.5Z","local":"2024-01-31T10:00:00","price":12.5}`, lookup.KeyStatusNeverSeen},
	} {
		res, err := lookup.WhereKey(e.Ctx, tbl, nil, c.key)
		if err != nil || res.Status != c.status {
			t.Errorf("where --key %s: %s, %v; want %s\n%s", c.key, res.Status, err, c.status, res.Explanation)
			continue
		}
		if c.status == lookup.KeyStatusRow && (res.Offset == nil || *res.Offset != 0) {
			t.Errorf("where --key %s: the row of offset %v, want 0", c.key, res.Offset)
		}
	}

	for _, c := range []struct{ key, want string }{
		{`{"id":"` + one + `","day":"2024-01-31","tod":"10:00:00.25","at":"2024-01-31T08:00:00.5Z","local":"2024-01-31T10:00:00","price":12.505}`, `key column price is a decimal(10, 2), and "12.505" is not one`},
		{`{"id":"` + one + `","day":"2024-01-31","tod":"10:00:00.25","at":"2024-01-31T08:00:00.5","local":"2024-01-31T10:00:00","price":12.5}`, `key column at is a timestamptz`},
		{`{"id":"x","day":"2024-01-31","tod":"10:00:00.25","at":"2024-01-31T08:00:00.5Z","local":"2024-01-31T10:00:00","price":12.5}`, `key column id is a uuid, and "x" is not one`},
		{`{"id":"` + one + `","day":true,"tod":"10:00:00.25","at":"2024-01-31T08:00:00.5Z","local":"2024-01-31T10:00:00","price":12.5}`, `key column day is a date: give it as a JSON string "2006-01-02"`},
		// Nanoseconds were cut to the row's microseconds (from a review).
		{`{"id":"` + one + `","day":"2024-01-31","tod":"10:00:00.25","at":"2024-01-31T08:00:00.5000009Z","local":"2024-01-31T10:00:00","price":12.5}`, `key column at is a timestamptz, and "2024-01-31T08:00:00.5000009Z" is not one`},
		{`{"id":"` + one + `","day":"2024-01-31","tod":"10:00:00.25","at":"2024-01-31T08:00:00.5Z","local":"2024-01-31T10:00:00.0000009","price":12.5}`, `key column local is a timestamp, and "2024-01-31T10:00:00.0000009" is not one`},
	} {
		_, err := lookup.WhereKey(e.Ctx, tbl, nil, c.key)
		if qe := (*lookup.QueryError)(nil); !errors.As(err, &qe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("where --key %s: %v; want a query error saying %q", c.key, err, c.want)
		}
	}
}
