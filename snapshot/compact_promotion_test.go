package snapshot_test

import (
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestCompactAfterPromotionOnePartition: identity(id) where id is an int
// first and a long later (a promotion floe makes). The files of partition
// id=1 written before the promotion are in manifests whose partition
// field is an Avro int (int32), those written after in manifests with a
// long (int64). A partitionKey that printed %T made one Iceberg partition
// two compaction bins, never merged into one file.
//
// From a review of this change; fixed since.
func TestCompactAfterPromotionOnePartition(t *testing.T) {
	l := mapping.Layout{Value: mapping.ValueJSON}
	pb := partitionBy(t, "identity(id)")
	tbl := openTestTable(t, tempCatalog(t), "lake.promo", snapshot.OpenOptions{Create: true, Layout: l, PartitionBy: pb})
	str := iceberg.PrimitiveTypes.String
	v1 := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int32}, {ID: 2, Name: "c", Type: str}}}
	v2 := &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64}, {ID: 2, Name: "c", Type: str}}}
	off := int64(0)
	for i := range 2 {
		if _, err := tbl.Commit(t.Context(), typedFlush(t, l, v1, off, map[string]any{"id": int32(1), "c": "a"}), snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(i, err)
		}
		off++
	}
	for i := range 2 {
		if _, err := tbl.Commit(t.Context(), typedFlush(t, l, v2, off, map[string]any{"id": int64(1), "c": "b"}), snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(i, err)
		}
		off++
	}
	for _, f := range liveFiles(t, tbl, tbl.Head().SnapshotID) {
		t.Logf("before: %s spec %d %s", f.path, f.spec, f.partition)
	}
	res, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compact %+v", res)
	if res.FilesAfter != 1 {
		t.Errorf("4 small files of the one partition id=1 (2 written before id's int->long promotion, 2 after) compact into %d files, want 1: partitionKey's %%T tells int32(1) from int64(1)", res.FilesAfter)
	}
}
