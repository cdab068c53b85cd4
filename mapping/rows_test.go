package mapping

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRowBuilderValues checks the raw value column batch after batch:
// values, empty values and nulls (tombstones) where they were appended,
// the first null after other rows or at the first row, batches without
// nulls after one with them, and an empty batch.
func TestRowBuilderValues(t *testing.T) {
	sc, err := table.SchemaToArrowSchema(Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := checkedRowBuilder(t, sc)
	// "-" is a null value; each batch is a list of values.
	batches := [][]string{
		{"a", "", "-", "bb", "-"},
		{"-", "c"},
		{"ddd", "e", ""},
		{},
		make([]string, 100),
	}
	for i := range batches[4] {
		batches[4][i] = fmt.Sprint(i)
		if i%7 == 6 {
			batches[4][i] = "-"
		}
	}
	for n, values := range batches {
		for i, v := range values {
			r := &kgo.Record{Topic: "t", Offset: int64(i)}
			if v != "-" {
				r.Value = []byte(v)
			}
			rb.Append(r)
		}
		b := rb.NewBatch()
		col := b.Column(sc.FieldIndices(ColValue)[0]).(*array.Binary)
		if int(b.NumRows()) != len(values) || col.Len() != len(values) {
			t.Fatalf("batch %d: %d rows, value column of %d, want %d", n, b.NumRows(), col.Len(), len(values))
		}
		nulls := 0
		for i, v := range values {
			got := string(col.Value(i))
			if col.IsNull(i) {
				got = "-"
				nulls++
			}
			if got != v {
				t.Errorf("batch %d row %d: value %q, want %q", n, i, got, v)
			}
		}
		if col.NullN() != nulls {
			t.Errorf("batch %d: NullN %d, want %d", n, col.NullN(), nulls)
		}
		b.Release()
	}
}

// TestRowBuilderMatchesArrowBuilders: the columns the builder makes in Go
// slices (topic, partition, offset, timestamp, headers, a binary or string
// key, the value) equal those Arrow's own builders make of the same
// records, batch after batch (each reserving room after the one before),
// with null and empty keys, values and header values, records without
// headers and with several.
func TestRowBuilderMatchesArrowBuilders(t *testing.T) {
	raw, err := table.SchemaToArrowSchema(Schema(), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	fields := raw.Fields()
	keyCol := raw.FieldIndices(ColKey)[0]
	fields[keyCol].Type = arrow.BinaryTypes.String
	md := raw.Metadata()
	stringKeys := arrow.NewSchema(fields, &md)
	for _, sc := range []*arrow.Schema{raw, stringKeys} {
		t.Run(sc.Field(keyCol).Type.String(), func(t *testing.T) {
			rb, mem := checkedRowBuilder(t, sc)
			for n, rows := range []int{5, 1, 0, 300, 7} {
				want := array.NewRecordBuilder(mem, sc)
				for i := range rows {
					r := &kgo.Record{Topic: fmt.Sprintf("topic%d", n%2), Partition: int32(n), Offset: int64(1000*n + i),
						Timestamp: time.UnixMicro(1_700_000_000_000_000 + int64(i)).Add(time.Duration(i) * time.Nanosecond)}
					if i%3 != 0 {
						r.Key = fmt.Appendf([]byte{}, "k%d", i%5)
					}
					if i%4 != 1 {
						r.Value = fmt.Appendf([]byte{}, "value %d", i)
					}
					for h := range i % 4 {
						hd := kgo.RecordHeader{Key: fmt.Sprintf("h%d", h)}
						if h != 1 {
							hd.Value = fmt.Appendf([]byte{}, "%d", h*i)
						}
						r.Headers = append(r.Headers, hd)
					}
					rb.Append(r)
					appendWithArrow(want, r)
				}
				var got arrow.RecordBatch
				if n == 3 {
					got = rb.TakeBatch() // the next batch grows from nothing
				} else {
					got = rb.NewBatch()
				}
				exp := want.NewRecordBatch()
				want.Release()
				if !array.RecordEqual(got, exp) {
					t.Errorf("batch %d differs from Arrow's builders':\ngot  %v\nwant %v", n, got, exp)
				}
				exp.Release()
				got.Release()
			}
		})
	}
}

// appendWithArrow appends r to b as a row of the raw layout, with Arrow's
// builders column by column.
func appendWithArrow(b *array.RecordBuilder, r *kgo.Record) {
	for i, f := range b.Schema().Fields() {
		fb := b.Field(i)
		switch f.Name {
		case ColTopic:
			fb.(*array.StringBuilder).Append(r.Topic)
		case ColPartition:
			fb.(*array.Int32Builder).Append(r.Partition)
		case ColOffset:
			fb.(*array.Int64Builder).Append(r.Offset)
		case ColTimestamp:
			fb.(*array.TimestampBuilder).Append(arrow.Timestamp(r.Timestamp.UnixMicro()))
		case ColHeaders:
			lb := fb.(*array.ListBuilder)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			lb.Append(true)
			for _, h := range r.Headers {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.StringBuilder).Append(h.Key)
				if h.Value == nil {
					sb.FieldBuilder(1).AppendNull()
				} else {
					sb.FieldBuilder(1).(*array.BinaryBuilder).Append(h.Value)
				}
			}
		case ColKey, ColValue:
			v := r.Key
			if f.Name == ColValue {
				v = r.Value
			}
			switch {
			case v == nil:
				fb.AppendNull()
			case f.Type.ID() == arrow.STRING:
				fb.(*array.StringBuilder).Append(string(v))
			default:
				fb.(*array.BinaryBuilder).Append(v)
			}
		}
	}
}

// checkedRowBuilder is a row builder of schema sc whose allocator the test
// checks for leaks at its end, with that allocator.
func checkedRowBuilder(t *testing.T, sc *arrow.Schema) (*RowBuilder, memory.Allocator) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	rb, err := NewRowBuilder(mem, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rb.Release)
	return rb, mem
}
