package floetest

import (
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// ForeignEqualityDelete commits, as another engine would (Spark's DELETE
// in merge-on-read mode), an equality delete of the rows of partition p at
// offset off of the floe table tbl.
func ForeignEqualityDelete(t testing.TB, tbl *table.Table, p int32, off int64) {
	t.Helper()
	ctx := t.Context()
	sc := tbl.Schema()
	pf, ok := sc.FindFieldByName(mapping.ColPartition)
	if !ok {
		t.Fatal("no partition column")
	}
	of, ok := sc.FindFieldByName(mapping.ColOffset)
	if !ok {
		t.Fatal("no offset column")
	}
	keySc := arrow.NewSchema([]arrow.Field{
		{Name: mapping.ColPartition, Type: arrow.PrimitiveTypes.Int32, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(pf.ID)})},
		{Name: mapping.ColOffset, Type: arrow.PrimitiveTypes.Int64, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(of.ID)})},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, keySc)
	b.Field(0).(*array.Int32Builder).Append(p)
	b.Field(1).(*array.Int64Builder).Append(off)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	txn := tbl.NewTransaction()
	deletes, err := txn.WriteEqualityDeletes(ctx, []int{pf.ID, of.ID}, func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) })
	if err != nil {
		t.Fatalf("write foreign equality delete: %v", err)
	}
	if err := txn.NewRowDelta(nil).AddDeletes(deletes...).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatalf("commit foreign equality delete: %v", err)
	}
}
