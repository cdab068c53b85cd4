package mapping

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Conform returns the rows of batches, in order, as one batch of schema: a
// writer schema the batches' own schemas evolved into (MergeType) while
// they were built. A column or nested field a batch lacks is null in its
// rows; an int column widens to long, a float to double, a decimal to a
// larger precision. Matching is by name, as the batches come from writer
// schemas without field IDs.
//
// A sink builds rows for the schema it knows; when a record brings a new
// field, the rows built so far are cut and the builders start again for
// the evolved schema. Conform joins the pieces at the flush, so that a
// schema change costs neither a commit nor a data file of its own. The
// caller keeps ownership of batches and owns the result.
func Conform(mem memory.Allocator, schema *arrow.Schema, batches []arrow.RecordBatch) (arrow.RecordBatch, error) {
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	cols := make([]arrow.Array, 0, schema.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, f := range schema.Fields() {
		parts := make([]arrow.Array, 0, len(batches))
		release := func() {
			for _, p := range parts {
				p.Release()
			}
		}
		for _, b := range batches {
			var p arrow.Array
			if idx := b.Schema().FieldIndices(f.Name); len(idx) == 1 {
				var err error
				if p, err = conformArray(mem, b.Column(idx[0]), f.Type); err != nil {
					release()
					return nil, fmt.Errorf("column %s: %w", f.Name, err)
				}
			} else {
				p = array.MakeArrayOfNull(mem, f.Type, int(b.NumRows()))
			}
			parts = append(parts, p)
		}
		col := parts[0]
		if len(parts) > 1 {
			var err error
			col, err = array.Concatenate(parts, mem)
			release()
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", f.Name, err)
			}
		}
		cols = append(cols, col)
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// conformArray returns arr as an array of type to, which holds every value
// of arr (to is arr's type evolved by MergeType).
func conformArray(mem memory.Allocator, arr arrow.Array, to arrow.DataType) (arrow.Array, error) {
	if arrow.TypeEqual(arr.DataType(), to) {
		arr.Retain()
		return arr, nil
	}
	d := arr.Data()
	switch to := to.(type) {
	case *arrow.StructType:
		src, ok := arr.(*array.Struct)
		if !ok {
			break
		}
		srcType := src.DataType().(*arrow.StructType)
		children := make([]arrow.ArrayData, 0, to.NumFields())
		defer func() {
			for _, c := range children {
				c.Release()
			}
		}()
		for _, f := range to.Fields() {
			var c arrow.Array
			if i, ok := srcType.FieldIdx(f.Name); ok {
				var err error
				if c, err = conformArray(mem, src.Field(i), f.Type); err != nil {
					return nil, fmt.Errorf("field %s: %w", f.Name, err)
				}
			} else {
				c = array.MakeArrayOfNull(mem, f.Type, src.Len()+d.Offset())
			}
			cd := c.Data()
			cd.Retain()
			c.Release()
			children = append(children, cd)
		}
		out := array.NewData(to, d.Len(), d.Buffers()[:1], children, d.NullN(), d.Offset())
		defer out.Release()
		return array.MakeFromData(out), nil
	case *arrow.ListType:
		src, ok := arr.(*array.List)
		if !ok {
			break
		}
		values, err := conformArray(mem, src.ListValues(), to.Elem())
		if err != nil {
			return nil, fmt.Errorf("element: %w", err)
		}
		defer values.Release()
		out := array.NewData(to, d.Len(), d.Buffers()[:2], []arrow.ArrayData{values.Data()}, d.NullN(), d.Offset())
		defer out.Release()
		return array.MakeFromData(out), nil
	case *arrow.MapType:
		src, ok := arr.(*array.Map)
		if !ok {
			break
		}
		entries, err := conformArray(mem, src.ListValues(), to.Elem())
		if err != nil {
			return nil, fmt.Errorf("map entries: %w", err)
		}
		defer entries.Release()
		out := array.NewData(to, d.Len(), d.Buffers()[:2], []arrow.ArrayData{entries.Data()}, d.NullN(), d.Offset())
		defer out.Release()
		return array.MakeFromData(out), nil
	case *arrow.Int64Type:
		src, ok := arr.(*array.Int32)
		if !ok {
			break
		}
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.Reserve(src.Len())
		for i := range src.Len() {
			if src.IsNull(i) {
				b.AppendNull()
			} else {
				b.Append(int64(src.Value(i)))
			}
		}
		return b.NewArray(), nil
	case *arrow.Float64Type:
		src, ok := arr.(*array.Float32)
		if !ok {
			break
		}
		b := array.NewFloat64Builder(mem)
		defer b.Release()
		b.Reserve(src.Len())
		for i := range src.Len() {
			if src.IsNull(i) {
				b.AppendNull()
			} else {
				b.Append(float64(src.Value(i)))
			}
		}
		return b.NewArray(), nil
	case *arrow.Decimal128Type:
		// A wider precision of the same scale: the same 16-byte values.
		from, ok := arr.DataType().(*arrow.Decimal128Type)
		if !ok || from.Scale != to.Scale || from.Precision > to.Precision {
			break
		}
		out := array.NewData(to, d.Len(), d.Buffers(), nil, d.NullN(), d.Offset())
		defer out.Release()
		return array.MakeFromData(out), nil
	}
	return nil, fmt.Errorf("cannot convert %s to %s", arr.DataType(), to)
}
