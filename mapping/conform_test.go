package mapping

import (
	"math/big"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConformJoinsEvolvedBatches builds rows for a schema, evolves it the
// ways MergeType does (a column added, a nested field added, int to long,
// float to double, a decimal widened, a list and a map whose elements
// gain fields), builds more rows, and checks that Conform joins both into
// one batch of the evolved schema with the old rows null where they had
// no value.
func TestConformJoinsEvolvedBatches(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	item := func(fields ...iceberg.NestedField) *iceberg.StructType { return &iceberg.StructType{FieldList: fields} }
	opt := func(name string, t iceberg.Type) iceberg.NestedField { return iceberg.NestedField{Name: name, Type: t} }
	dec := func(p int) iceberg.Type { return iceberg.DecimalTypeOf(p, 2) }
	v1 := item(
		opt("n", iceberg.PrimitiveTypes.Int32),
		opt("f", iceberg.PrimitiveTypes.Float32),
		opt("d", dec(9)),
		opt("s", item(opt("x", iceberg.PrimitiveTypes.String))),
		opt("l", &iceberg.ListType{Element: item(opt("x", iceberg.PrimitiveTypes.Int32)), ElementRequired: false}),
		opt("m", &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: iceberg.PrimitiveTypes.Int32}),
	)
	v2 := item(
		opt("n", iceberg.PrimitiveTypes.Int64),
		opt("f", iceberg.PrimitiveTypes.Float64),
		opt("d", dec(18)),
		opt("s", item(opt("x", iceberg.PrimitiveTypes.String), opt("y", iceberg.PrimitiveTypes.Bool))),
		opt("l", &iceberg.ListType{Element: item(opt("x", iceberg.PrimitiveTypes.Int64), opt("z", iceberg.PrimitiveTypes.String)), ElementRequired: false}),
		opt("m", &iceberg.MapType{KeyType: iceberg.PrimitiveTypes.String, ValueType: iceberg.PrimitiveTypes.Int64}),
		opt("added", iceberg.PrimitiveTypes.String),
	)
	l := Layout{Value: ValueJSON, Key: KeyRaw}
	build := func(st *iceberg.StructType, value map[string]any) (*RowBuilder, error) {
		sc, err := WriterArrowSchema(l.WriterSchema(nil, st))
		if err != nil {
			return nil, err
		}
		rb, err := l.NewRowBuilder(mem, sc)
		if err != nil {
			return nil, err
		}
		return rb, rb.AppendDecoded(&kgo.Record{Topic: "t", Offset: 1}, nil, value)
	}
	d9, _ := DecimalOf(big.NewInt(12345), 2)
	old, err := build(v1, map[string]any{
		"n": int32(7), "f": float32(1.5), "d": d9,
		"s": map[string]any{"x": "a"},
		"l": []any{map[string]any{"x": int32(3)}, nil},
		"m": []MapEntry{{Key: "k", Value: int32(9)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Release()
	neu, err := build(v2, map[string]any{"n": int64(1) << 40, "added": "yes", "s": map[string]any{"x": "b", "y": true}})
	if err != nil {
		t.Fatal(err)
	}
	defer neu.Release()
	b1, b2 := old.NewBatch(), neu.NewBatch()
	defer b1.Release()
	defer b2.Release()
	got, err := Conform(mem, b2.Schema(), []arrow.RecordBatch{b1, b2})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if got.NumRows() != 2 || !got.Schema().Equal(b2.Schema()) {
		t.Fatalf("got %d rows of %s", got.NumRows(), got.Schema())
	}
	want := map[string][2]string{
		"n":     {"7", "1099511627776"},
		"f":     {"1.5", "(null)"},
		"d":     {"123.45", "(null)"},
		"s":     {`{"x":"a","y":null}`, `{"x":"b","y":true}`},
		"l":     {`[{"x":3,"z":null},null]`, "(null)"},
		"m":     {`[{"key":"k","value":9}]`, "(null)"},
		"added": {"(null)", "yes"},
	}
	for name, w := range want {
		col := got.Column(got.Schema().FieldIndices(name)[0])
		for i := range 2 {
			if s := col.ValueStr(i); s != w[i] {
				t.Errorf("%s row %d = %s, want %s", name, i, s, w[i])
			}
		}
	}
}
