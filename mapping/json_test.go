package mapping

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

func field(name string, t iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{Name: name, Type: t}
}

func st(fields ...iceberg.NestedField) *iceberg.StructType {
	return &iceberg.StructType{FieldList: fields}
}

var (
	tLong   = iceberg.PrimitiveTypes.Int64
	tDouble = iceberg.PrimitiveTypes.Float64
	tString = iceberg.PrimitiveTypes.String
	tBool   = iceberg.PrimitiveTypes.Bool
)

// TestDecodeJSON checks inference, evolution against the table's columns,
// and the canonical values, one case per rule.
func TestDecodeJSON(t *testing.T) {
	for _, c := range []struct {
		name    string
		have    *iceberg.StructType
		json    string
		want    *iceberg.StructType
		changed bool
		value   map[string]any
	}{
		{"types of a new table, in document order", st(), `{"id":7,"price":2.5,"ok":true,"name":"a"}`,
			st(field("id", tLong), field("price", tDouble), field("ok", tBool), field("name", tString)), true,
			map[string]any{"id": int64(7), "price": 2.5, "ok": true, "name": "a"}},
		{"nested objects and arrays", st(), `{"o":{"x":1},"l":[1,2]}`,
			st(field("o", st(field("x", tLong))), field("l", &iceberg.ListType{Element: tLong})), true,
			map[string]any{"o": map[string]any{"x": int64(1)}, "l": []any{int64(1), int64(2)}}},
		{"integers and fractions in one new array meet in double", st(), `{"l":[1,2.5]}`,
			st(field("l", &iceberg.ListType{Element: tDouble})), true,
			map[string]any{"l": []any{1.0, 2.5}}},
		{"an integer fits a double column", st(field("p", tDouble)), `{"p":3}`,
			st(field("p", tDouble)), false, map[string]any{"p": 3.0}},
		{"a new field adds an optional column", st(field("id", tLong)), `{"id":1,"extra":"x"}`,
			st(field("id", tLong), field("extra", tString)), true, map[string]any{"id": int64(1), "extra": "x"}},
		{"a missing field keeps its column", st(field("id", tLong), field("gone", tString)), `{"id":1}`,
			st(field("id", tLong), field("gone", tString)), false, map[string]any{"id": int64(1)}},
		{"nulls and empty lists make no column", st(), `{"id":1,"n":null,"e":[],"o":{"z":null}}`,
			st(field("id", tLong)), true, map[string]any{"id": int64(1)}},
		{"null in an existing column", st(field("id", tLong)), `{"id":null,"n":1}`,
			st(field("id", tLong), field("n", tLong)), true, map[string]any{"id": nil, "n": int64(1)}},
		{"an object of nulls is null", st(field("id", tLong)), `{"id":null}`,
			st(field("id", tLong)), false, nil},
		// As where no column exists yet: the same record, the same row.
		{"values without a type are null in existing columns", st(field("id", tLong), field("l", &iceberg.ListType{Element: tLong}), field("o", st(field("z", tLong)))),
			`{"id":1,"l":[[]],"o":{"z":null}}`,
			st(field("id", tLong), field("l", &iceberg.ListType{Element: tLong}), field("o", st(field("z", tLong)))), false, map[string]any{"id": int64(1), "l": nil, "o": nil}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, changed, v, err := DecodeJSON([]byte(c.json), c.have)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(c.want) || changed != c.changed || !reflect.DeepEqual(v, c.value) {
				t.Fatalf("DecodeJSON = %s, changed %v, %v\nwant %s, changed %v, %v", got, changed, v, c.want, c.changed, c.value)
			}
			if err := CheckValue("", got, false, v); err != nil {
				t.Fatalf("the value does not fit the type it came with: %v", err)
			}
		})
	}
}

func TestDecodeJSONRejects(t *testing.T) {
	var decodeErr *DecodeError
	var conflict *SchemaConflictError
	var typeErr *TypeError
	for _, c := range []struct {
		name   string
		have   *iceberg.StructType
		json   string
		target any
	}{
		{"malformed", st(), `{"a":`, &decodeErr},
		{"not an object", st(), `[1,2]`, &decodeErr},
		{"trailing data", st(), `{} {}`, &decodeErr},
		{"a fraction in a long column (Iceberg cannot widen long to double)", st(field("id", tLong)), `{"id":1.5}`, &conflict},
		{"a string where a struct was", st(field("o", st(field("x", tLong)))), `{"o":"s"}`, &conflict},
		{"an integer out of range", st(), `{"id":123456789012345678901234567890}`, &typeErr},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := DecodeJSON([]byte(c.json), c.have)
			switch target := c.target.(type) {
			case **DecodeError:
				if !errors.As(err, target) {
					t.Fatalf("err %v, want a DecodeError", err)
				}
			case **SchemaConflictError:
				if !errors.As(err, target) {
					t.Fatalf("err %v, want a SchemaConflictError", err)
				}
			case **TypeError:
				if !errors.As(err, target) {
					t.Fatalf("err %v, want a TypeError", err)
				}
			}
		})
	}
}

// FuzzDecodeJSON: decoding never panics, and whatever decodes fits the
// type it came with.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,2.5],"b":{"c":null}}`, `{"a":"x","a":2}`, `[]`, `{"a":[[]]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, _, v, err := DecodeJSON([]byte(s), st(field("a", tLong)))
		if err != nil {
			return
		}
		if err := CheckValue("", got, false, v); err != nil {
			t.Fatalf("%q decoded to a value that does not fit its type %s: %v", s, got, err)
		}
	})
}

// TestDecodeJSONNotJSON: a value that is not JSON is named so in the
// dead letter's reason, with its text, not only in encoding/json's words,
// which for "not json" speak of a literal null (from new-user runs).
func TestDecodeJSONNotJSON(t *testing.T) {
	_, _, _, err := DecodeJSON([]byte("not json"), nil)
	if err == nil || !strings.HasPrefix(err.Error(), `decode json: not valid JSON: "not json" (at byte 2: invalid character`) {
		t.Fatalf("DecodeJSON(not json): %v", err)
	}
}

// TestDecodeJSONEmptyValue: an empty value (kcat without -Z sends one where
// a tombstone was meant) is refused saying so, where the reason was
// "not valid JSON: EOF" (from a new user).
func TestDecodeJSONEmptyValue(t *testing.T) {
	for _, v := range [][]byte{{}, []byte(" \n")} {
		_, _, _, err := DecodeJSON(v, nil)
		if !errors.Is(err, ErrEmptyJSON) {
			t.Errorf("DecodeJSON(%q): %v, want ErrEmptyJSON", v, err)
		}
	}
}

// TestDecodeJSONCutShort: a JSON text that ends before its value does
// (kcat -K: splits a JSON key such as {"id":1} at its first colon) is
// refused showing the text, where the reason was "not valid JSON: EOF"
// (from a new-user run).
func TestDecodeJSONCutShort(t *testing.T) {
	_, _, _, err := DecodeJSON([]byte(`{"id"`), nil)
	if err == nil || !strings.Contains(err.Error(), `"{\"id\"" ends before its value does`) {
		t.Fatalf("DecodeJSON of a text cut short: %v", err)
	}
	long := []byte(`{"a":"` + strings.Repeat("x", 100))
	if _, _, _, err := DecodeJSON(long, nil); err == nil || !strings.Contains(err.Error(), "(and 42 more bytes)") {
		t.Fatalf("DecodeJSON of a long text cut short: %v", err)
	}
}

// TestJSONSchemaBytesPlaceholder: Confluent's JsonSchemaConverter writes
// a Kafka Connect BYTES field (a Postgres bytea column) as a JSON string
// with "connect.type":"bytes", its value base64. floe's JSON Schema codec
// maps it to a string column holding the base64 text: a bytea column's
// unchanged-TOAST placeholder became the row's value when registry events
// were taken for typed bytes (from a review). The codec says so.
func TestJSONSchemaBytesPlaceholder(t *testing.T) {
	schema := `{"type":"object","title":"Envelope","properties":{
	  "before":{"oneOf":[{"type":"null"},{"$ref":"#/definitions/Value"}]},
	  "after":{"oneOf":[{"type":"null"},{"$ref":"#/definitions/Value"}]},
	  "op":{"type":"string"}},
	 "definitions":{"Value":{"type":"object","properties":{
	  "id":{"type":"integer","connect.type":"int32"},
	  "doc":{"oneOf":[{"type":"null"},{"type":"string","connect.type":"bytes"}]}}}}}`
	c, err := NewJSONSchemaCodec(schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(UnavailableValue))
	event, err := c.Decode([]byte(`{"before":null,"after":{"id":1,"doc":"` + b64 + `"},"op":"u"}`))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := DebeziumChange(c, event, mustPlaceholder(t, ""))
	if _, ok := errors.AsType[*UnavailableValueError](err); !ok {
		t.Errorf("a bytea column's placeholder through the JSON Schema registry format: change %v, row %v, err %v; want an *UnavailableValueError", ch.Kind, ch.Row, err)
	}
}

// TestUnavailableSpellings: the forms of Debezium's unchanged-TOAST
// placeholder by column type are those its connector derives from it
// (java.util.Base64, its HexConverter, UUID.nameUUIDFromBytes, a
// Jackson map for hstore's JSON mode), for its default and for a setting
// of unavailable.value.placeholder given as text or as hex: bytes.
func TestUnavailableSpellings(t *testing.T) {
	for _, c := range []struct{ setting, text, base64, hex, uuid, hstore string }{
		{"", UnavailableValue, "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==", "5f5f646562657a69756d5f756e617661696c61626c655f76616c7565",
			"b68a35a7-17ad-35b3-af2a-ae46edb4545a", `{"__debezium_unavailable_value":"__debezium_unavailable_value"}`},
		{"<toast>", "<toast>", "PHRvYXN0Pg==", "3c746f6173743e", "", `{"<toast>":"<toast>"}`},
		{"hex:00ff", "\x00\uFFFD", "AP8=", "00ff", "", ""},
	} {
		p := mustPlaceholder(t, c.setting)
		if p.text != c.text || p.base64 != c.base64 || p.hex != c.hex || c.uuid != "" && p.uuid != c.uuid || c.hstore != "" && p.hstore != c.hstore {
			t.Errorf("placeholder %q: %+v, want text %q base64 %q hex %q uuid %q hstore %q", c.setting, p, c.text, c.base64, c.hex, c.uuid, c.hstore)
		}
		if !p.is([]any{p.uuid}, false) {
			t.Errorf("placeholder %q: a uuid[] column's placeholder is not recognised", c.setting)
		}
	}
	for _, bad := range []string{"hex:", "hex:0g", "hex:abc"} {
		if _, err := ParsePlaceholder(bad); err == nil || !strings.Contains(err.Error(), "unavailable.value.placeholder") {
			t.Errorf("placeholder %q: %v, want an error naming unavailable.value.placeholder", bad, err)
		}
	}
}

func mustPlaceholder(t *testing.T, setting string) *Placeholder {
	t.Helper()
	p, err := ParsePlaceholder(setting)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
