package mapping

import (
	"errors"
	"math/big"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// TestAppendValue writes one canonical value of every type floe writes
// through the Arrow schema iceberg-go derives from the Iceberg type, and
// reads it back.
func TestAppendValue(t *testing.T) {
	dec, ok := DecimalOf(big.NewInt(12345), 2)
	if !ok {
		t.Fatal("decimal")
	}
	id := uuid.MustParse("3f6a9a0e-6a52-4a7e-9f8e-8e0b3a1d2c4f")
	fields := []struct {
		t iceberg.Type
		v any
	}{
		{iceberg.PrimitiveTypes.Bool, true},
		{iceberg.PrimitiveTypes.Int32, int32(-7)},
		{iceberg.PrimitiveTypes.Int64, int32(5)}, // promoted
		{iceberg.PrimitiveTypes.Float32, float32(1.5)},
		{iceberg.PrimitiveTypes.Float64, float32(2.5)}, // promoted
		{iceberg.DecimalTypeOf(9, 2), dec},
		{iceberg.PrimitiveTypes.Date, iceberg.Date(19000)},
		{iceberg.PrimitiveTypes.Time, iceberg.Time(3_600_000_000)},
		{iceberg.PrimitiveTypes.TimestampTz, iceberg.Timestamp(1_700_000_000_000_000)},
		{iceberg.PrimitiveTypes.Timestamp, iceberg.Timestamp(1_700_000_000_000_000)},
		{iceberg.PrimitiveTypes.String, "s"},
		{iceberg.PrimitiveTypes.UUID, id},
		{iceberg.FixedTypeOf(3), []byte{1, 2, 3}},
		{iceberg.PrimitiveTypes.Binary, []byte{9}},
		{&iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 101, Name: "a", Type: iceberg.PrimitiveTypes.Int64}, {ID: 102, Name: "b", Type: iceberg.PrimitiveTypes.String}}},
			map[string]any{"a": int64(1)}},
		{&iceberg.ListType{ElementID: 103, Element: iceberg.PrimitiveTypes.String}, []any{"x", nil}},
		{&iceberg.MapType{KeyID: 104, KeyType: iceberg.PrimitiveTypes.String, ValueID: 105, ValueType: iceberg.PrimitiveTypes.Int64},
			[]MapEntry{{Key: "k", Value: int64(3)}}},
		{iceberg.PrimitiveTypes.String, nil},
	}
	var nf []iceberg.NestedField
	for i, f := range fields {
		nf = append(nf, iceberg.NestedField{ID: i + 1, Name: "c" + string(rune('a'+i)), Type: f.t})
	}
	sc, err := table.SchemaToArrowSchema(iceberg.NewSchema(0, nf...), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewRecordBuilder(memory.NewGoAllocator(), sc)
	defer b.Release()
	for i, f := range fields {
		if err := CheckValue(nf[i].Name, f.t, false, f.v); err != nil {
			t.Fatalf("%s: %v", f.t, err)
		}
		if err := AppendValue(b.Field(i), f.v); err != nil {
			t.Fatalf("%s: %v", f.t, err)
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	for i, want := range []string{"true", "-7", "5", "1.5", "2.5", "123.45", "2022-01-08", "01:00:00.000000", "2023-11-14T22:13:20Z", "2023-11-14T22:13:20",
		"s", id.String(), "AQID", "CQ==", `{"a":1,"b":null}`, `["x",null]`, `[{"key":"k","value":3}]`, "(null)"} {
		if got := rec.Column(i).ValueStr(0); got != want {
			t.Errorf("column %d (%s): %q, want %q", i, fields[i].t, got, want)
		}
	}
}

func TestCheckValueRejects(t *testing.T) {
	st := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: "a", Type: iceberg.PrimitiveTypes.Int64, Required: true}}}
	for name, c := range map[string]struct {
		t iceberg.Type
		v any
	}{
		"a long into an int":          {iceberg.PrimitiveTypes.Int32, int64(1)},
		"a double into a float":       {iceberg.PrimitiveTypes.Float32, 1.0},
		"a string into a long":        {iceberg.PrimitiveTypes.Int64, "1"},
		"too many digits":             {iceberg.DecimalTypeOf(3, 0), iceberg.Decimal{Val: decimal128.FromI64(12345), Scale: 0}},
		"another scale":               {iceberg.DecimalTypeOf(9, 2), iceberg.Decimal{Val: decimal128.FromI64(1), Scale: 3}},
		"a fixed of the wrong length": {iceberg.FixedTypeOf(2), []byte{1}},
		"null in a required field":    {st, map[string]any{"a": nil}},
		"a field the struct lacks":    {st, map[string]any{"a": int64(1), "b": 2}},
	} {
		var te *TypeError
		if err := CheckValue("c", c.t, false, c.v); !errors.As(err, &te) {
			t.Errorf("%s: err %v, want a TypeError", name, err)
		}
	}
}

func TestMergeType(t *testing.T) {
	long, double := iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.Float64
	for _, c := range []struct {
		name     string
		have, in iceberg.Type
		want     iceberg.Type
		changed  bool
		conflict bool
	}{
		{"same", long, long, long, false, false},
		{"int to long", iceberg.PrimitiveTypes.Int32, long, long, true, false},
		{"an int into a long column", long, iceberg.PrimitiveTypes.Int32, long, false, false},
		{"float to double", iceberg.PrimitiveTypes.Float32, double, double, true, false},
		{"decimal precision", iceberg.DecimalTypeOf(9, 2), iceberg.DecimalTypeOf(12, 2), iceberg.DecimalTypeOf(12, 2), true, false},
		{"long to double", long, double, nil, false, true},
		{"narrowing", long, iceberg.PrimitiveTypes.Int32, long, false, false},
		{"string to long", iceberg.PrimitiveTypes.String, long, nil, false, true},
		{"decimal scale", iceberg.DecimalTypeOf(9, 2), iceberg.DecimalTypeOf(9, 3), nil, false, true},
		{"new struct field", st(field("a", long)), st(field("b", double)),
			st(field("a", long), field("b", double)), true, false},
		{"list element widened", &iceberg.ListType{Element: iceberg.PrimitiveTypes.Int32}, &iceberg.ListType{Element: long},
			&iceberg.ListType{Element: long}, true, false},
	} {
		got, changed, err := MergeType("c", c.have, c.in)
		var conflict *SchemaConflictError
		switch {
		case c.conflict && !errors.As(err, &conflict):
			t.Errorf("%s: err %v, want a SchemaConflictError", c.name, err)
		case !c.conflict && (err != nil || !got.Equals(c.want) || changed != c.changed):
			t.Errorf("%s: MergeType = %s, %v, %v; want %s, %v", c.name, got, changed, err, c.want, c.changed)
		}
	}
}
