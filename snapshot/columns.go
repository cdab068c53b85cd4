package snapshot

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// keyOf is the identity of a row's key: its bytes for a raw key, its
// text for a string key, and Arrow's rendering of any other decoded key
// (the same value renders the same for one schema, which a scan projects
// every file to).
func keyOf(col arrow.Array, i int) string {
	switch c := col.(type) {
	case *array.Binary:
		return string(c.Value(i))
	case *array.String:
		return c.Value(i)
	}
	return col.ValueStr(i)
}

// column returns the named column of b.
func column(b arrow.RecordBatch, name string) (arrow.Array, error) {
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return nil, fmt.Errorf("batch has no column %q", name)
	}
	return b.Column(idx[0]), nil
}

// columnAs returns the named column of b as type A.
func columnAs[A arrow.Array](b arrow.RecordBatch, name string) (A, error) {
	var zero A
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return zero, fmt.Errorf("batch has no column %q", name)
	}
	a, ok := b.Column(idx[0]).(A)
	if !ok {
		return zero, fmt.Errorf("column %q has type %s", name, b.Column(idx[0]).DataType())
	}
	return a, nil
}

// takeRows returns a new batch of b's rows at the given indices.
func takeRows(ctx context.Context, b arrow.RecordBatch, rows []int) (arrow.RecordBatch, error) {
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	for _, i := range rows {
		ib.Append(int64(i))
	}
	idx := ib.NewInt64Array()
	defer idx.Release()
	out, err := compute.Take(ctx, *compute.DefaultTakeOptions(), compute.NewDatumWithoutOwning(b), compute.NewDatumWithoutOwning(idx))
	if err != nil {
		return nil, fmt.Errorf("select latest rows: %w", err)
	}
	return out.(*compute.RecordDatum).Value, nil
}
