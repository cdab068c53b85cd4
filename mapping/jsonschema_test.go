package mapping

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// jsonSchemaObject wraps a property schema in an object schema with one
// property, f.
func jsonSchemaObject(prop string) string {
	return `{"type":"object","$defs":{"Point":{"type":"object","properties":{"x":{"type":"number"},"y":{"type":"number"}}}},` +
		`"definitions":{"Id":{"type":"integer"}},"properties":{"f":` + prop + `}}`
}

// TestJSONSchemaMapping checks one row of the JSON Schema mapping table
// (docs/typed-tables.md) per case: a payload written by encoding/json from
// the Go value, decoded by the codec, gives the canonical value, and the
// property gets the Iceberg type.
func TestJSONSchemaMapping(t *testing.T) {
	id := uuid.MustParse("3f6a9a0e-6a52-4a7e-9f8e-8e0b3a1d2c4f")
	at := time.Date(2024, 5, 17, 11, 45, 30, 123456000, time.UTC)
	point := st(field("x", tDouble), field("y", tDouble))
	for _, c := range []struct {
		row      string
		schema   string // the schema of property f
		value    any    // what encoding/json writes; json.RawMessage as is
		wantType iceberg.Type
		want     any // nil: null
	}{
		{"object → struct (properties, in schema order)", `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}`,
			map[string]any{"a": 1, "b": "x", "undeclared": true}, st(field("b", tString), field("a", tLong)), map[string]any{"a": int64(1), "b": "x"}},
		{"array → list (items)", `{"type":"array","items":{"type":"string"}}`, []string{"a", "b"},
			&iceberg.ListType{Element: tString}, []any{"a", "b"}},
		{"array without items → list of JSON text", `{"type":"array"}`, []any{1, "x", map[string]any{"a": nil}},
			&iceberg.ListType{Element: tString}, []any{"1", `"x"`, `{"a":null}`}},
		{"array with tuple items → list of JSON text", `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}]}`, []any{1, "x"},
			&iceberg.ListType{Element: tString}, []any{"1", `"x"`}},
		{"string → string", `{"type":"string"}`, "héllo", tString, "héllo"},
		{"format date-time → timestamptz", `{"type":"string","format":"date-time"}`, "2024-05-17T13:45:30.123456+02:00", tTsTz, TimestampOf(at)},
		{"format date → date", `{"type":"string","format":"date"}`, "2024-05-17", tDate, iceberg.Date(19860)},
		{"format time → time", `{"type":"string","format":"time"}`, "13:45:30.5", tTime, iceberg.Time((13*3600+45*60+30)*1_000_000 + 500_000)},
		{"format time with an offset → time in UTC", `{"type":"string","format":"time"}`, "01:00:00+02:00", tTime, iceberg.Time(23 * 3600 * 1_000_000)},
		// RFC 3339 allows a lower-case z and a leap second, read as the
		// second after it as in a date-time (from a review).
		{"format time with a lower-case z", `{"type":"string","format":"time"}`, "12:00:00z", tTime, iceberg.Time(12 * 3600 * 1_000_000)},
		{"format time of a leap second", `{"type":"string","format":"time"}`, "12:59:60Z", tTime, iceberg.Time(13 * 3600 * 1_000_000)},
		{"format uuid → uuid", `{"type":"string","format":"uuid"}`, id.String(), tUUID, id},
		{"other formats → string", `{"type":"string","format":"email"}`, "a@b.c", tString, "a@b.c"},
		{"integer → long", `{"type":"integer"}`, int64(1) << 60, tLong, int64(1) << 60},
		{"integer written with a fraction of zero → long", `{"type":"integer"}`, json.RawMessage(`3.0`), tLong, int64(3)},
		{"number → double", `{"type":"number"}`, 2.5, tDouble, 2.5},
		{"boolean → boolean", `{"type":"boolean"}`, true, tBool, true},
		{`type [T, "null"] → optional T (a value)`, `{"type":["string","null"],"format":"date"}`, "2024-05-17", tDate, iceberg.Date(19860)},
		{`type [T, "null"] → optional T (null)`, `{"type":["string","null"]}`, nil, tString, nil},
		{"anyOf [T, null] → optional T", `{"anyOf":[{"type":"integer"},{"type":"null"}]}`, 5, tLong, int64(5)},
		{"oneOf [null, T] → optional T", `{"oneOf":[{"type":"null"},{"$ref":"#/$defs/Point"}]}`, nil, point, nil},
		{"$ref within the schema ($defs)", `{"$ref":"#/$defs/Point"}`, map[string]any{"x": 1, "y": 2.5}, point, map[string]any{"x": 1.0, "y": 2.5}},
		{"$ref within the schema (definitions)", `{"$ref":"#/definitions/Id"}`, 9, tLong, int64(9)},
		{"other anyOf/oneOf → struct of one optional field per JSON kind", `{"oneOf":[{"type":"string"},{"type":"integer"},{"$ref":"#/$defs/Point"}]}`,
			map[string]any{"x": 1, "y": 2}, st(field("integer", tLong), field("string", tString), field("object", point)),
			map[string]any{"object": map[string]any{"x": 1.0, "y": 2.0}}},
		{"type [T1, T2] → struct of one optional field per JSON kind", `{"type":["integer","string","null"]}`, "x",
			st(field("integer", tLong), field("string", tString)), map[string]any{"string": "x"}},
		{"object with additionalProperties only → map<string, V>", `{"type":"object","additionalProperties":{"type":"integer"}}`,
			json.RawMessage(`{"b":2,"a":1}`), &iceberg.MapType{KeyType: tString, ValueType: tLong},
			[]MapEntry{{Key: "b", Value: int64(2)}, {Key: "a", Value: int64(1)}}},
		{"free-form object → string (JSON text)", `{"type":"object"}`, json.RawMessage(`{"b": [1, "x", null], "a": {}}`),
			tString, `{"b":[1,"x",null],"a":{}}`},
		{"any value ({} or true) → string (JSON text)", `true`, 12.5, tString, `12.5`},
		{"enum without type → the type of its values", `{"enum":["RED","GREEN"]}`, "GREEN", tString, "GREEN"},
		{"allOf of objects → one struct of their properties", `{"allOf":[{"$ref":"#/$defs/Point"},{"properties":{"label":{"type":"string"}}},{"required":["label"]}]}`,
			map[string]any{"x": 1, "label": "p"}, st(field("x", tDouble), field("y", tDouble), field("label", tString)),
			map[string]any{"x": 1.0, "label": "p"}},
	} {
		t.Run(c.row, func(t *testing.T) {
			schema := jsonSchemaObject(c.schema)
			payload, err := json.Marshal(map[string]any{"f": c.value})
			if err != nil {
				t.Fatal(err)
			}
			codec, err := NewJSONSchemaCodec(schema, nil)
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

// TestJSONSchemaNull: a property of type null holds nothing and gets no
// column.
func TestJSONSchemaNull(t *testing.T) {
	c, err := NewJSONSchemaCodec(`{"type":"object","properties":{"n":{"type":"null"},"id":{"type":"integer"}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, c, []byte(`{"n":null,"id":3}`), st(field("id", tLong)), map[string]any{"id": int64(3)})
}

// TestJSONSchemaNotAnObject: a schema that is not an object with
// properties gives one column, value.
func TestJSONSchemaNotAnObject(t *testing.T) {
	c, err := NewJSONSchemaCodec(`{"type":"array","items":{"type":"integer"}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, c, []byte(`[1,2]`), &iceberg.ListType{Element: tLong}, []any{int64(1), int64(2)})
	_, err = c.Decode([]byte(`[1,"x"]`))
	if err == nil || err.Error() != "decode json-schema: field value.element: a string where the schema says integer" {
		t.Errorf("err %v, want one naming the value column", err)
	}
}

// TestJSONSchemaReferences: $refs to the schemas the registry lists as
// references, by name, relative to the schema's $id, and with a pointer.
func TestJSONSchemaReferences(t *testing.T) {
	refs := map[string]string{
		"address.json": `{"$id":"https://acme.example/schemas/address.json","type":"object",` +
			`"properties":{"city":{"type":"string"},"geo":{"$ref":"geo.json#/$defs/LatLon"}}}`,
		"geo.json": `{"$defs":{"LatLon":{"type":"array","items":{"type":"number"}}}}`,
	}
	schema := `{"$id":"https://acme.example/schemas/customer.json","type":"object","properties":{` +
		`"name":{"type":"string"},"home":{"$ref":"address.json"},"work":{"$ref":"https://acme.example/schemas/address.json"}}}`
	c, err := NewJSONSchemaCodec(schema, refs)
	if err != nil {
		t.Fatal(err)
	}
	addr := st(field("city", tString), field("geo", &iceberg.ListType{Element: tDouble}))
	payload, err := json.Marshal(map[string]any{"name": "Ann", "home": map[string]any{"city": "Lyon", "geo": []float64{45.76, 4.83}}})
	if err != nil {
		t.Fatal(err)
	}
	checkDecode(t, c, payload, st(field("name", tString), field("home", addr), field("work", addr)),
		map[string]any{"name": "Ann", "home": map[string]any{"city": "Lyon", "geo": []any{45.76, 4.83}}})
}

func TestJSONSchemaSchemaErrors(t *testing.T) {
	for _, c := range []struct {
		name, schema, field, problem string
	}{
		{"two branches of one kind", jsonSchemaObject(`{"oneOf":[{"$ref":"#/$defs/Point"},{"type":"object","properties":{"r":{"type":"number"}}}]}`),
			"f", "oneOf branches 0 and 1 are both JSON object"},
		{"recursive $ref", `{"type":"object","properties":{"tree":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object",` +
			`"properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}}}`,
			"tree.kids.element", "contains it"},
		{"unknown reference", jsonSchemaObject(`{"$ref":"other.json"}`), "f", `$ref "other.json": no reference of that name`},
		{"bad pointer", jsonSchemaObject(`{"$ref":"#/$defs/Nope"}`), "f", `no "Nope"`},
		{"unknown type", jsonSchemaObject(`{"type":"date"}`), "f", `unknown type "date"`},
		{"allOf of an object and a string", jsonSchemaObject(`{"allOf":[{"$ref":"#/$defs/Point"},{"type":"string"}]}`), "f", "merges only objects"},
		{"only null", `{"type":"null"}`, "", "admits only null"},
		{"not JSON", `{"type":`, "", "json-schema schema"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewJSONSchemaCodec(c.schema, nil)
			wantSchemaError(t, err, c.field, c.problem)
		})
	}
}

func TestJSONSchemaDecodeErrors(t *testing.T) {
	c, err := NewJSONSchemaCodec(jsonSchemaGolden, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ payload, want string }{
		{`{"order_id":"not-a-uuid"}`, `field order_id: uuid "not-a-uuid"`},
		{`{"placed_at":"2024-05-17 13:45"}`, `field placed_at: date-time "2024-05-17 13:45" is not RFC 3339`},
		{`{"lines":[{"quantity":1.5}]}`, "field lines.element.quantity: number 1.5 is not an integer that fits a long"},
		{`{"lines":[{"quantity":1e30}]}`, "field lines.element.quantity: number 1e30 is not an integer that fits a long"},
		{`{"total":1e400}`, "field total: number 1e400 does not fit a double"},
		{`{"shipping":{"address":"x"}}`, "field shipping.address: a string where the schema says object"},
		{`[]`, "an array where the schema says object"},
		{`{"a":1} x`, "decode json-schema: data after the JSON value"},
	} {
		_, err := c.Decode([]byte(tc.payload))
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want a DecodeError with %q", tc.payload, err, tc.want)
		}
	}
}

const jsonSchemaGolden = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://acme.example/schemas/order.json",
  "title": "Order",
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "format": "uuid"},
    "placed_at": {"type": "string", "format": "date-time"},
    "customer": {"$ref": "#/$defs/Customer"},
    "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
    "total": {"type": "number"},
    "shipping": {
      "type": ["object", "null"],
      "properties": {"address": {"$ref": "#/$defs/Address"}, "deliver_on": {"type": "string", "format": "date"}}
    },
    "tags": {"type": "object", "additionalProperties": {"type": "string"}},
    "extra": {}
  },
  "required": ["order_id", "placed_at", "lines"],
  "$defs": {
    "Customer": {"type": "object", "properties": {"id": {"type": "integer"}, "email": {"type": ["string", "null"], "format": "email"}}},
    "Line": {"type": "object", "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}, "unit_price": {"type": "number"}}},
    "Address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}, "country": {"enum": ["FR", "DE"]}}}
  }
}`

// TestJSONSchemaGolden: the Iceberg schema of an order written with $refs.
func TestJSONSchemaGolden(t *testing.T) {
	c, err := NewJSONSchemaCodec(jsonSchemaGolden, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "jsonschema_order", c)
	checkAppend(t, c, []byte(jsonOrderSample))
}

// jsonOrderSample is an order the golden schema describes.
const jsonOrderSample = `{"order_id":"3f6a9a0e-6a52-4a7e-9f8e-8e0b3a1d2c4f","placed_at":"2024-05-17T13:45:30Z","customer":{"id":7,"email":null},` +
	`"lines":[{"sku":"X-1","quantity":2,"unit_price":19.99}],"total":39.98,"shipping":{"address":{"city":"Lyon","country":"FR"},` +
	`"deliver_on":"2024-05-20"},"tags":{"channel":"web"},"extra":[1,{"a":null}]}`

func FuzzJSONSchemaDecode(f *testing.F) {
	c, err := NewJSONSchemaCodec(jsonSchemaGolden, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(jsonOrderSample))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, payload []byte) { checkFuzzed(t, c, payload) })
}

// FuzzJSONSchemaCodec fuzzes the schema as well as the payload: floe
// interprets JSON Schema itself, so a schema must never make it panic or
// stall, and a codec it makes must keep Decode's promise.
func FuzzJSONSchemaCodec(f *testing.F) {
	f.Add(jsonSchemaGolden, jsonOrderSample)
	f.Add(jsonSchemaObject(`{"oneOf":[{"type":"string"},{"type":"integer"},{"$ref":"#/$defs/Point"}]}`), `{"f":{"x":1}}`)
	f.Add(jsonSchemaObject(`{"allOf":[{"$ref":"#/$defs/Point"},{"properties":{"label":{"type":"string"}}},{"required":["label"]}]}`), `{"f":{"x":1,"label":"a"}}`)
	f.Fuzz(func(t *testing.T, schema, payload string) {
		c, err := NewJSONSchemaCodec(schema, nil)
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a SchemaError", err)
			}
			return
		}
		checkIDs(t, c.Type())
		checkFuzzed(t, c, []byte(payload))
	})
}
