package snapshot_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// typedFlush builds a flush of partition 0 of topic t at offsets from
// low, one row per value, for a table of layout l whose value columns are
// values.
func typedFlush(t *testing.T, l mapping.Layout, values *iceberg.StructType, low int64, rows ...map[string]any) snapshot.Flush {
	t.Helper()
	want := l.WriterSchema(nil, values)
	sc, err := mapping.WriterArrowSchema(want)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := l.NewRowBuilder(memory.NewGoAllocator(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	for i, v := range rows {
		if err := mapping.CheckValue("", values, false, v); err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: "t", Offset: low + int64(i), Timestamp: time.UnixMilli(1_700_000_000_000)}
		if err := rb.AppendDecoded(r, nil, v); err != nil {
			t.Fatal(err)
		}
	}
	return snapshot.Flush{
		Batches: map[mapping.TopicPartition][]arrow.RecordBatch{tp: {rb.NewBatch()}},
		Ranges:  []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: low, High: low + int64(len(rows))}, Records: int64(len(rows))}},
		Schema:  want,
	}
}

// TestCommitEvolvesSchema: a typed table gains the columns its flushes
// need, and the promotions Iceberg allows, in the same snapshot as the
// data; rows written before a change read as null in the new columns.
func TestCommitEvolvesSchema(t *testing.T) {
	l := mapping.Layout{Value: mapping.ValueJSON}
	tbl := openTestTable(t, tempCatalog(t), "lake.typed", snapshot.OpenOptions{Create: true, Layout: l})
	long, str := iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.String
	v1 := &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int32},
		{ID: 2, Name: "item", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 3, Name: "sku", Type: str}}}},
	}}
	commit := func(f snapshot.Flush) {
		t.Helper()
		if _, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	commit(typedFlush(t, l, v1, 0, map[string]any{"id": int32(1), "item": map[string]any{"sku": "a"}}))
	before := tbl.Head().SnapshotID
	// v2: id widened to long, a nested field and a column added.
	v2 := &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 1, Name: "id", Type: long},
		{ID: 2, Name: "item", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 3, Name: "sku", Type: str}, {ID: 4, Name: "qty", Type: long}}}},
		{ID: 5, Name: "note", Type: str},
	}}
	commit(typedFlush(t, l, v2, 1, map[string]any{"id": int64(1 << 40), "item": map[string]any{"sku": "b", "qty": int64(3)}, "note": "n"}))

	sc := tbl.Iceberg().Schema()
	for name, want := range map[string]iceberg.Type{"id": long, "item.qty": long, "note": str} {
		f, ok := sc.FindFieldByName(name)
		if !ok || !f.Type.Equals(want) || f.Required {
			t.Fatalf("column %s: %v (found %v); want optional %s", name, f, ok, want)
		}
	}
	if s := tbl.Iceberg().Metadata().SnapshotByID(before); s.SchemaID == nil || *s.SchemaID == sc.ID {
		t.Fatalf("the first snapshot has schema %v: the change must land with the second", s.SchemaID)
	}
	// Read back through iceberg-go: the first row reads its widened id
	// and null in the columns added after it.
	_, it, err := tbl.Iceberg().Scan(table.WithSelectedFields("kafka_offset", "id", "note", "item")).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(b.NumRows()) {
			off := b.Column(b.Schema().FieldIndices("kafka_offset")[0]).ValueStr(i)
			got[off] = fmt.Sprintf("%s %s %s", b.Column(b.Schema().FieldIndices("id")[0]).ValueStr(i),
				b.Column(b.Schema().FieldIndices("note")[0]).ValueStr(i), b.Column(b.Schema().FieldIndices("item")[0]).ValueStr(i))
		}
		b.Release()
	}
	want := map[string]string{"0": `1 (null) {"qty":null,"sku":"a"}`, "1": `1099511627776 n {"qty":3,"sku":"b"}`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}
