package audit_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestForeignFileWithoutPositionColumns (from a new-user run): a table
// another tool created and wrote rows into, before floe's kafka_*
// columns were added to it (optional) and floe sank into it. Its data
// file has none of the position columns, which the files level reports
// as a foreign file; the rows and content levels read those columns of
// every file, and stopped on it with Arrow's "no leaf column readers
// matched col indices". They leave it to the files level's finding now,
// and judge floe's rows as before. A file of floe's replaced by one
// without them is a file-content finding.
func TestForeignFileWithoutPositionColumns(t *testing.T) {
	e := newEnv(t)
	ctx := e.Ctx
	cat, ident := e.CatalogOf("lake.kc")
	_ = cat.CreateNamespace(ctx, ident[:1], nil)
	ice, err := cat.CreateTable(ctx, ident, iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "order_id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "sku", Type: iceberg.PrimitiveTypes.String}))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := table.SchemaToArrowSchema(ice.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(`[{"order_id":1001,"sku":"kc1"},{"order_id":1002,"sku":"kc2"}]`))
	if err != nil {
		t.Fatal(err)
	}
	tab := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer tab.Release()
	if ice, err = ice.AppendTable(ctx, tab, 1024, nil); err != nil {
		t.Fatal(err)
	}
	// floe's columns, added as the user did: optional.
	txn := ice.NewTransaction()
	headers := &iceberg.ListType{ElementID: 1, ElementRequired: true, Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 2, Name: "key", Type: iceberg.PrimitiveTypes.String, Required: true},
		{ID: 3, Name: "value", Type: iceberg.PrimitiveTypes.Binary}}}}
	if err := txn.UpdateSchema(true, true).
		AddColumn([]string{mapping.ColTopic}, iceberg.PrimitiveTypes.String, "", false, nil).
		AddColumn([]string{mapping.ColPartition}, iceberg.PrimitiveTypes.Int32, "", false, nil).
		AddColumn([]string{mapping.ColOffset}, iceberg.PrimitiveTypes.Int64, "", false, nil).
		AddColumn([]string{mapping.ColTimestamp}, iceberg.PrimitiveTypes.TimestampTz, "", false, nil).
		AddColumn([]string{mapping.ColKey}, iceberg.PrimitiveTypes.Binary, "", false, nil).
		AddColumn([]string{mapping.ColHeaders}, headers, "", false, nil).Commit(); err != nil {
		t.Fatal(err)
	}
	if err := txn.SetProperties(iceberg.Properties{mapping.PropValue: string(mapping.ValueJSON)}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	e.Topic("kc", 1, nil)
	recs := make([]*kgo.Record, 5)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "kc", Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)), Value: []byte(`{"order_id":` + string(rune('1'+i)) + `,"sku":"f"}`)}
	}
	e.Produce(recs)
	tbl, dlq := e.TableWithDeadLetters("lake.kc", snapshot.OpenOptions{Layout: mapping.Layout{Value: mapping.ValueJSON}})
	e.sink(tbl, connector.Config{Topic: "kc", DeadLetters: dlq})

	foreign := "files foreign-file"
	rep := e.audit(tbl, filesDepth)
	expectFindings(t, rep, foreign)
	path := rep.Findings[0].File
	for _, opts := range []audit.Options{rowsDepth, contentDepth(e)} {
		rep := e.audit(tbl, opts)
		expectFindings(t, rep, foreign)
		if p := rep.Partitions[0]; p.Rows != 5 {
			t.Errorf("depth %v: partition %s has %d rows, want floe's 5", opts.Depth, p.TopicPartition, p.Rows)
		}
		if !slices.ContainsFunc(rep.Notes, func(n string) bool {
			return strings.HasPrefix(n, "data file "+path+" (2 rows") && strings.Contains(n, "no Kafka position")
		}) {
			t.Errorf("depth %v: no note on the file without position columns: %q", opts.Depth, rep.Notes)
		}
	}

	// floe's file, replaced in place by a copy of the foreign one.
	var floeFile snapshot.DataFile
	files, err := tbl.Files(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Path != path {
			floeFile = f
		}
	}
	b, err := os.ReadFile(strings.TrimPrefix(path, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(strings.TrimPrefix(floeFile.Path, "file://"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep = e.audit(tbl, rowsDepth)
	expectFindings(t, rep, foreign, "rows file-content", "rows count-mismatch kc/0 [0, 5)")
	for _, f := range rep.Findings {
		if f.Kind == audit.KindFileContent && (f.File != floeFile.Path || !strings.Contains(f.Detail, "it has none of the columns kafka_partition, kafka_offset, kafka_topic")) {
			t.Errorf("finding %+v, want file %s without position columns", f, floeFile.Path)
		}
	}
}
