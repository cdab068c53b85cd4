package mapping

import (
	"fmt"
	"testing"

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
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rb, err := NewRowBuilder(mem, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
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
