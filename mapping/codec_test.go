package mapping

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// withoutIDs returns a copy of t with every field ID zero, to compare a
// codec's type (placeholder IDs) with the one a test writes down.
func withoutIDs(t iceberg.Type) iceberg.Type {
	switch t := t.(type) {
	case *iceberg.StructType:
		out := &iceberg.StructType{FieldList: make([]iceberg.NestedField, len(t.FieldList))}
		for i, f := range t.FieldList {
			f.ID = 0
			f.Type = withoutIDs(f.Type)
			out.FieldList[i] = f
		}
		return out
	case *iceberg.ListType:
		out := *t
		out.ElementID = 0
		out.Element = withoutIDs(t.Element)
		return &out
	case *iceberg.MapType:
		out := *t
		out.KeyID, out.ValueID = 0, 0
		out.KeyType = withoutIDs(t.KeyType)
		out.ValueType = withoutIDs(t.ValueType)
		return &out
	}
	return t
}

// checkDecode decodes payload with c and compares the result with want,
// and c's type with wantType (IDs aside); the value must pass CheckValue.
func checkDecode(t *testing.T, c Codec, payload []byte, wantType iceberg.Type, want any) {
	t.Helper()
	if got := withoutIDs(c.Type()); !got.Equals(wantType) {
		t.Errorf("type %s, want %s", got, wantType)
	}
	v, err := c.Decode(payload)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("decoded %#v, want %#v", v, want)
	}
	if err := CheckValue("", c.Type(), false, v); err != nil {
		t.Errorf("CheckValue: %v", err)
	}
}

// checkIDs fails unless the field IDs of t are 1..n, each once.
func checkIDs(t *testing.T, typ iceberg.Type) {
	t.Helper()
	var ids []int
	var walk func(iceberg.Type)
	walk = func(typ iceberg.Type) {
		switch typ := typ.(type) {
		case *iceberg.StructType:
			for _, f := range typ.FieldList {
				ids = append(ids, f.ID)
				walk(f.Type)
			}
		case *iceberg.ListType:
			ids = append(ids, typ.ElementID)
			walk(typ.Element)
		case *iceberg.MapType:
			ids = append(ids, typ.KeyID, typ.ValueID)
			walk(typ.KeyType)
			walk(typ.ValueType)
		}
	}
	walk(typ)
	seen := map[int]bool{}
	for _, id := range ids {
		if id < 1 || id > len(ids) || seen[id] {
			t.Fatalf("field IDs %v are not 1..%d, each once", ids, len(ids))
		}
		seen[id] = true
	}
}

// checkGolden compares the Iceberg schema of a codec's type, as a catalog
// stores it, with testdata/name.golden (-update rewrites it).
func checkGolden(t *testing.T, name string, c Codec) {
	t.Helper()
	checkIDs(t, c.Type())
	st, ok := c.Type().(*iceberg.StructType)
	if !ok {
		t.Fatalf("type %s is not a struct", c.Type())
	}
	got, err := json.MarshalIndent(iceberg.NewSchema(0, st.FieldList...), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("schema differs from %s (run with -update to accept):\n%s", path, got)
	}
}

// wantSchemaError fails unless err is a *SchemaError whose text names the
// field and contains problem.
func wantSchemaError(t *testing.T, err error, field, problem string) {
	t.Helper()
	var se *SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("err %v, want a SchemaError", err)
	}
	if se.Path != field || !strings.Contains(se.Error(), problem) {
		t.Errorf("err %q (field %q), want field %q and %q", se, se.Path, field, problem)
	}
}

// checkFuzzed is what every codec fuzz test asserts: Decode returns a
// value CheckValue accepts, or a *DecodeError.
func checkFuzzed(t *testing.T, c Codec, payload []byte) {
	v, err := c.Decode(payload)
	if err != nil {
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("error %v is not a DecodeError", err)
		}
		return
	}
	if err := CheckValue("", c.Type(), false, v); err != nil {
		t.Fatalf("decoded value fails CheckValue: %v", err)
	}
}

func TestMetadataColumnNames(t *testing.T) {
	_, err := NewAvroCodec(`{"type":"record","name":"R","fields":[{"name":"id","type":"long"},{"name":"kafka_offset","type":"long"}]}`, nil)
	wantSchemaError(t, err, "kafka_offset", "metadata column kafka_offset")
	_, err = NewProtobufCodec(map[string]string{"r.proto": `syntax = "proto3"; message R { string Kafka_Key = 1; }`}, "r.proto", nil)
	wantSchemaError(t, err, "Kafka_Key", "metadata column kafka_key")
	_, err = NewJSONSchemaCodec(`{"type":"object","properties":{"kafka_headers":{"type":"string"}}}`, nil)
	wantSchemaError(t, err, "kafka_headers", "metadata column kafka_headers")
	// nested fields are not columns: no clash
	if _, err := NewAvroCodec(`{"type":"record","name":"R","fields":[{"name":"meta","type":{"type":"record","name":"M","fields":[{"name":"kafka_offset","type":"long"}]}}]}`, nil); err != nil {
		t.Errorf("nested kafka_offset: %v", err)
	}
}

// checkAppend decodes payload and writes the value through AppendValue
// into builders of the Arrow schema iceberg-go derives from the codec's
// type, the way the sink will: a type the codec gives must be one the
// table can be written with.
func checkAppend(t *testing.T, c Codec, payload []byte) {
	t.Helper()
	v, err := c.Decode(payload)
	if err != nil {
		t.Fatal(err)
	}
	st := c.Type().(*iceberg.StructType)
	sc, err := table.SchemaToArrowSchema(iceberg.NewSchema(0, st.FieldList...), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer b.Release()
	m := v.(map[string]any)
	for i, f := range st.FieldList {
		if err := AppendValue(b.Field(i), m[f.Name]); err != nil {
			t.Fatalf("column %s: %v", f.Name, err)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	if rec.NumRows() != 1 {
		t.Fatalf("%d rows", rec.NumRows())
	}
}
