package mapping

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// avroRecord wraps a field type in a record with one field, f.
func avroRecord(fieldType string) string {
	return `{"type":"record","name":"R","namespace":"test","fields":[{"name":"f","type":` + fieldType + `}]}`
}

var (
	tInt   = iceberg.PrimitiveTypes.Int32
	tTsTz  = iceberg.PrimitiveTypes.TimestampTz
	tTs    = iceberg.PrimitiveTypes.Timestamp
	tTime  = iceberg.PrimitiveTypes.Time
	tDate  = iceberg.PrimitiveTypes.Date
	tBytes = iceberg.PrimitiveTypes.Binary
	tUUID  = iceberg.PrimitiveTypes.UUID
)

// TestAvroMapping checks one row of the Avro mapping table
// (docs/typed-tables.md) per case: a payload marshalled by hamba/avro from
// the Go value, decoded by the codec, gives the canonical value, and the
// field gets the Iceberg type.
func TestAvroMapping(t *testing.T) {
	ts := time.Date(2024, 5, 17, 13, 45, 30, 123456000, time.UTC)
	id := uuid.MustParse("3f6a9a0e-6a52-4a7e-9f8e-8e0b3a1d2c4f")
	inner := `{"type":"record","name":"Inner","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}`
	for _, c := range []struct {
		row      string
		schema   string // the type of field f
		value    any    // what hamba marshals
		wantType iceberg.Type
		want     any // nil: the field is null
	}{
		{"record → struct", inner, map[string]any{"a": 3, "b": "x"},
			st(field("a", tInt), field("b", tString)), map[string]any{"a": int32(3), "b": "x"}},
		{"array → list", `{"type":"array","items":"long"}`, []int64{1, 2},
			&iceberg.ListType{Element: tLong}, []any{int64(1), int64(2)}},
		{"map → map<string, V>", `{"type":"map","values":"int"}`, map[string]int{"k": 7},
			&iceberg.MapType{KeyType: tString, ValueType: tInt}, []MapEntry{{Key: "k", Value: int32(7)}}},
		{"enum → string", `{"type":"enum","name":"Color","symbols":["RED","GREEN"]}`, "GREEN", tString, "GREEN"},
		{"bytes → binary", `"bytes"`, []byte{0, 1, 255}, tBytes, []byte{0, 1, 255}},
		{"fixed → fixed(L)", `{"type":"fixed","name":"F3","size":3}`, [3]byte{1, 2, 3}, iceberg.FixedTypeOf(3), []byte{1, 2, 3}},
		{"date → date", `{"type":"int","logicalType":"date"}`, time.Date(2024, 5, 17, 0, 0, 0, 0, time.UTC),
			tDate, iceberg.Date(19860)},
		{"time-millis → time", `{"type":"int","logicalType":"time-millis"}`, 13*time.Hour + 45*time.Minute + 123*time.Millisecond,
			tTime, iceberg.Time((13*3600+45*60)*1_000_000 + 123_000)},
		{"time-micros → time", `{"type":"long","logicalType":"time-micros"}`, 13*time.Hour + 456*time.Microsecond,
			tTime, iceberg.Time(13*3600*1_000_000 + 456)},
		{"timestamp-millis → timestamptz", `{"type":"long","logicalType":"timestamp-millis"}`, ts,
			tTsTz, iceberg.Timestamp(ts.UnixMilli() * 1000)},
		{"timestamp-micros → timestamptz", `{"type":"long","logicalType":"timestamp-micros"}`, ts,
			tTsTz, iceberg.Timestamp(ts.UnixMicro())},
		{"local-timestamp-millis → timestamp", `{"type":"long","logicalType":"local-timestamp-millis"}`, ts,
			tTs, iceberg.Timestamp(ts.UnixMilli() * 1000)},
		{"local-timestamp-micros → timestamp", `{"type":"long","logicalType":"local-timestamp-micros"}`, ts,
			tTs, iceberg.Timestamp(ts.UnixMicro())},
		{"decimal (bytes) → decimal(P,S)", `{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}`, big.NewRat(-12345, 100),
			iceberg.DecimalTypeOf(9, 2), iceberg.Decimal{Val: decimal128.FromI64(-12345), Scale: 2}},
		{"decimal (fixed) → decimal(P,S)", `{"type":"fixed","name":"D","size":16,"logicalType":"decimal","precision":38,"scale":4}`,
			new(big.Rat).SetFrac(new(big.Int).Exp(big.NewInt(10), big.NewInt(37), nil), big.NewInt(10000)),
			iceberg.DecimalTypeOf(38, 4), iceberg.Decimal{Val: decimal128.FromBigInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(37), nil)), Scale: 4}},
		{"uuid → uuid", `{"type":"string","logicalType":"uuid"}`, id.String(), tUUID, id},
		{"int → int", `"int"`, int32(-5), tInt, int32(-5)},
		{"long → long", `"long"`, int64(1) << 40, tLong, int64(1) << 40},
		{"float → float", `"float"`, float32(1.5), iceberg.PrimitiveTypes.Float32, float32(1.5)},
		{"double → double", `"double"`, 2.25, tDouble, 2.25},
		{"boolean → boolean", `"boolean"`, true, tBool, true},
		{"string → string", `"string"`, "héllo", tString, "héllo"},
		{"[null, T] → optional T (a value)", `["null","string"]`, "x", tString, "x"},
		{"[null, T] → optional T (null)", `["null","string"]`, nil, tString, nil},
		{"[T, null] → optional T", `["long","null"]`, int64(4), tLong, int64(4)},
		{"other unions → struct of one optional field per branch", `["null","int","string",` + inner + `,{"type":"long","logicalType":"timestamp-millis"}]`,
			map[string]any{"test.Inner": map[string]any{"a": 1, "b": "y"}},
			st(field("int", tInt), field("string", tString), field("Inner", st(field("a", tInt), field("b", tString))), field("timestamp_millis", tTsTz)),
			map[string]any{"Inner": map[string]any{"a": int32(1), "b": "y"}}},
		{"other unions: the null branch → null", `["null","int","string"]`, nil,
			st(field("int", tInt), field("string", tString)), nil},
		{"duration → fixed(12)", `{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}`,
			avro.LogicalDuration{Months: 1, Days: 2, Milliseconds: 3},
			iceberg.FixedTypeOf(12), []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0}},
	} {
		t.Run(c.row, func(t *testing.T) {
			schema := avroRecord(c.schema)
			payload, err := avro.Marshal(avro.MustParse(schema), map[string]any{"f": c.value})
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			codec, err := NewAvroCodec(schema, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{}
			if c.want != nil {
				want["f"] = c.want
			}
			checkDecode(t, codec, payload, st(field("f", c.wantType)), want)
		})
	}
}

// TestAvroNullField: a field of type null holds nothing and gets no
// column; its neighbours decode.
func TestAvroNullField(t *testing.T) {
	schema := `{"type":"record","name":"R","fields":[{"name":"n","type":"null"},{"name":"id","type":"long"}]}`
	payload, err := avro.Marshal(avro.MustParse(schema), map[string]any{"n": nil, "id": int64(9)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewAvroCodec(schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, c, payload, st(field("id", tLong)), map[string]any{"id": int64(9)})
}

// TestAvroNotARecord: a schema that is not a record gives one column,
// value, of its type.
func TestAvroNotARecord(t *testing.T) {
	payload, err := avro.Marshal(avro.MustParse(`"string"`), "plain")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewAvroCodec(`"string"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, c, payload, tString, "plain")
	_, err = c.Decode([]byte{0x08, 'a'})
	if err == nil || err.Error() != "decode avro: field value: length 4 with 1 bytes left" {
		t.Errorf("err %v, want one naming the value column", err)
	}
}

// TestAvroReferences: a schema using named types the registry lists as
// references, which use one another, given in any order.
func TestAvroReferences(t *testing.T) {
	refs := map[string]string{
		"com.acme.Address": `{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"},{"name":"country","type":"com.acme.Country"}]}`,
		"com.acme.Country": `{"type":"enum","name":"Country","namespace":"com.acme","symbols":["FR","DE"]}`,
	}
	schema := `{"type":"record","name":"Customer","namespace":"com.acme","fields":[{"name":"name","type":"string"},{"name":"address","type":"com.acme.Address"}]}`
	c, err := NewAvroCodec(schema, refs)
	if err != nil {
		t.Fatal(err)
	}
	// marshal with the same definitions inlined
	full := `{"type":"record","name":"Customer","namespace":"com.acme","fields":[{"name":"name","type":"string"},{"name":"address","type":` +
		`{"type":"record","name":"Address","fields":[{"name":"city","type":"string"},{"name":"country","type":` + refs["com.acme.Country"] + `}]}}]}`
	payload, err := avro.Marshal(avro.MustParse(full), map[string]any{"name": "Ann", "address": map[string]any{"city": "Lyon", "country": "FR"}})
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, c, payload, st(field("name", tString), field("address", st(field("city", tString), field("country", tString)))),
		map[string]any{"name": "Ann", "address": map[string]any{"city": "Lyon", "country": "FR"}})

	_, err = NewAvroCodec(schema, map[string]string{"com.acme.Address": refs["com.acme.Address"]})
	wantSchemaError(t, err, "", "reference com.acme.Address")
}

func TestAvroSchemaErrors(t *testing.T) {
	for _, c := range []struct {
		name, schema, field, problem string
	}{
		{"recursive record", `{"type":"record","name":"Node","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]}`,
			"next", "record Node contains itself"},
		{"decimal too wide", avroRecord(`{"type":"bytes","logicalType":"decimal","precision":40,"scale":0}`), "f", "at most 38 digits"},
		{"array of null", avroRecord(`{"type":"array","items":"null"}`), "f", "array of null"},
		{"nested record of null fields", avroRecord(`{"type":"record","name":"E","fields":[{"name":"n","type":"null"}]}`), "f", "record test.E has no field"},
		{"a record of null fields", `{"type":"record","name":"E","fields":[{"name":"n","type":"null"}]}`, "", "no field has a type"},
		{"not Avro", `{"type":"nope"}`, "", "unknown type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewAvroCodec(c.schema, nil)
			wantSchemaError(t, err, c.field, c.problem)
		})
	}
}

// avroDoubling returns a schema of depth records, each with two fields of
// the next: a few lines whose type has 2^depth leaves.
func avroDoubling(depth int) string {
	s := `{"type":"record","name":"R0","fields":[{"name":"v","type":"int"}]}`
	for i := 1; i <= depth; i++ {
		s = fmt.Sprintf(`{"type":"record","name":"R%d","fields":[{"name":"a","type":%s},{"name":"b","type":"R%d"}]}`, i, s, i-1)
	}
	return s
}

// TestAvroExpansionBound: a schema whose type would have 2^20 leaves is
// refused quickly instead of stalling the sink; 2^10 is fine.
func TestAvroExpansionBound(t *testing.T) {
	if _, err := NewAvroCodec(avroDoubling(10), nil); err != nil {
		t.Fatal(err)
	}
	_, err := NewAvroCodec(avroDoubling(20), nil)
	var se *SchemaError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "expands to more than 100000 types") {
		t.Fatalf("err %v, want a SchemaError about the expansion", err)
	}
}

func TestAvroDecodeErrors(t *testing.T) {
	schema := `{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"items","type":{"type":"array","items":` +
		`{"type":"record","name":"I","fields":[{"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}}]}}}]}`
	c, err := NewAvroCodec(schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"empty", nil, "decode avro: field id: the payload ends inside the value"},
		{"huge block count", []byte{2, 0xfe, 0xff, 0xff, 0xff, 0x0f}, "decode avro: field items: block of 2147483647 items with 0 bytes left"},
		{"timestamp out of range", []byte{2, 2, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0},
			"decode avro: field items.element.at: timestamp 9223372036854775807 ms is out of range"},
		{"bytes left over", []byte{2, 0, 7}, "decode avro: 1 bytes left after the value: the payload was not written with this schema"},
	} {
		_, err := c.Decode(tc.payload)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name, schema string
		payload      []byte
		want         string
	}{
		{"a map key that repeats", avroRecord(`{"type":"map","values":"int"}`), []byte{4, 2, 'k', 2, 2, 'k', 4, 0},
			`decode avro: field f: map key "k" repeats`},
		{"a map key that repeats after more keys than are searched without a set", avroRecord(`{"type":"map","values":"int"}`),
			avroIntMap("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "c"), `decode avro: field f: map key "c" repeats`},
		{"a time outside a day", avroRecord(`{"type":"int","logicalType":"time-millis"}`), []byte{0x80, 0xf0, 0xb2, 0x52},
			"decode avro: field f: time of day 86400000 is outside [0, 24h)"},
		{"a decimal wider than its precision", avroRecord(`{"type":"bytes","logicalType":"decimal","precision":2,"scale":0}`), []byte{2, 100},
			"decode avro: field f: decimal 100 (unscaled) has more digits than the precision allows"},
		{"a string that is not UTF-8", avroRecord(`"string"`), []byte{2, 0xff}, "decode avro: field f: string is not valid UTF-8"},
		{"an enum index out of range", avroRecord(`{"type":"enum","name":"E","symbols":["A"]}`), []byte{2}, "decode avro: field f: enum index 1, the enum has 1 symbols"},
		{"a union branch out of range", avroRecord(`["null","int"]`), []byte{4}, "decode avro: field f: union branch 2, the union has 2"},
	} {
		c, err := NewAvroCodec(tc.schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Decode(tc.payload); err == nil || err.Error() != tc.want {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

// avroIntMap encodes a map of int values 0 with the keys given, in one
// block, repeats included.
func avroIntMap(keys ...string) []byte {
	b := []byte{byte(2 * len(keys))}
	for _, k := range keys {
		b = append(append(b, byte(2*len(k))), k...)
		b = append(b, 0)
	}
	return append(b, 0)
}

// TestAvroEvolution: v2 adds an optional field, v3 promotes int to long;
// each version's type merges into the table's through MergeType without
// conflict, and records of every version fit the merged type.
func TestAvroEvolution(t *testing.T) {
	v1 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"}]}`
	v2 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"},{"name":"note","type":["null","string"],"default":null}]}`
	v3 := `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"long"},{"name":"note","type":["null","string"],"default":null}]}`
	var table iceberg.Type
	var values []any
	for i, c := range []struct {
		schema  string
		value   map[string]any
		changed bool
		want    iceberg.Type
	}{
		{v1, map[string]any{"id": "a", "qty": 1}, true, st(field("id", tString), field("qty", tInt))},
		{v2, map[string]any{"id": "b", "qty": 2, "note": "gift"}, true, st(field("id", tString), field("qty", tInt), field("note", tString))},
		{v3, map[string]any{"id": "c", "qty": int64(1) << 40, "note": nil}, true, st(field("id", tString), field("qty", tLong), field("note", tString))},
		{v1, map[string]any{"id": "d", "qty": 4}, false, st(field("id", tString), field("qty", tLong), field("note", tString))},
	} {
		codec, err := NewAvroCodec(c.schema, nil)
		if err != nil {
			t.Fatal(err)
		}
		if table == nil {
			table = codec.Type()
		} else {
			merged, changed, err := MergeType("", table, codec.Type())
			if err != nil || changed != c.changed {
				t.Fatalf("version %d: MergeType changed=%v err=%v, want changed=%v", i+1, changed, err, c.changed)
			}
			table = merged
		}
		if !withoutIDs(table).Equals(c.want) {
			t.Fatalf("version %d: table type %s, want %s", i+1, table, c.want)
		}
		payload, err := avro.Marshal(avro.MustParse(c.schema), c.value)
		if err != nil {
			t.Fatal(err)
		}
		v, err := codec.Decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
		for j, v := range values {
			if err := CheckValue("", table, false, v); err != nil {
				t.Errorf("after version %d, the record of step %d does not fit: %v", i+1, j+1, err)
			}
		}
	}
}

// TestAvroGolden: the Iceberg schema of an order with nested items.
func TestAvroGolden(t *testing.T) {
	c, err := NewAvroCodec(avroOrder, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "avro_order", c)
	checkAppend(t, c, avroOrderSample(t))
}

const avroOrder = `{
  "type": "record", "name": "Order", "namespace": "com.acme.shop",
  "fields": [
    {"name": "order_id", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
      {"name": "id", "type": "long"},
      {"name": "email", "type": ["null", "string"], "default": null}
    ]}},
    {"name": "placed_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["PLACED", "PAID", "SHIPPED"]}},
    {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
      {"name": "sku", "type": "string"},
      {"name": "quantity", "type": "int"},
      {"name": "unit_price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}
    ]}}},
    {"name": "attributes", "type": {"type": "map", "values": "string"}},
    {"name": "payment", "type": ["null", "string", {"type": "record", "name": "Card", "fields": [
      {"name": "last4", "type": "string"}, {"name": "expires", "type": {"type": "int", "logicalType": "date"}}
    ]}], "default": null}
  ]
}`

// avroOrderSample returns an order marshalled by hamba/avro.
func avroOrderSample(t testing.TB) []byte {
	t.Helper()
	payload, err := avro.Marshal(avro.MustParse(avroOrder), map[string]any{
		"order_id":   "3f6a9a0e-6a52-4a7e-9f8e-8e0b3a1d2c4f",
		"customer":   map[string]any{"id": int64(7), "email": "a@b.c"},
		"placed_at":  time.UnixMilli(1_700_000_000_000).UTC(),
		"status":     "PAID",
		"items":      []map[string]any{{"sku": "X-1", "quantity": 2, "unit_price": big.NewRat(1999, 100)}},
		"attributes": map[string]string{"channel": "web"},
		"payment":    map[string]any{"com.acme.shop.Card": map[string]any{"last4": "4242", "expires": time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

func FuzzAvroDecode(f *testing.F) {
	c, err := NewAvroCodec(avroOrder, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(avroOrderSample(f))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) { checkFuzzed(t, c, payload) })
}

// BenchmarkAvroDecode decodes the order sample, the cost per record a
// typed sink pays before appending.
func BenchmarkAvroDecode(b *testing.B) {
	c, err := NewAvroCodec(avroOrder, nil)
	if err != nil {
		b.Fatal(err)
	}
	payload := avroOrderSample(b)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Decode(payload); err != nil {
			b.Fatal(err)
		}
	}
}
