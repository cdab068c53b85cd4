package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
)

// createForeignOrders creates table name as another tool would (from a
// new-user run migrating from Kafka Connect): its own columns, order_id
// required, partitioned by day(ts), no floe property.
func createForeignOrders(t *testing.T, st *localstack.Stack, name string) {
	t.Helper()
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	if err := cat.CreateNamespace(t.Context(), ident[:1], nil); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
	sc := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "order_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "status", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 3, Name: "customer", Type: iceberg.PrimitiveTypes.Int32},
		iceberg.NestedField{ID: 4, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
	)
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{4}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}})
	if _, err := cat.CreateTable(t.Context(), ident, sc, icecat.WithPartitionSpec(&spec),
		icecat.WithProperties(iceberg.Properties{"owner": "spark-job"}), icecat.WithLocation(filepath.Join(t.TempDir(), ident[1]))); err != nil {
		t.Fatal(err)
	}
}

// alterForeign changes table name's schema with iceberg-go alone.
func alterForeign(t *testing.T, st *localstack.Stack, name string, change func(*table.UpdateSchema) *table.UpdateSchema) {
	t.Helper()
	txn := foreignTable(t, st.Catalog(), name).NewTransaction()
	if err := change(txn.UpdateSchema(true, false)).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// addFloeColumns adds floe's columns to table name, optional as on a table
// that holds rows (raw: with the raw layout's value column).
func addFloeColumns(t *testing.T, st *localstack.Stack, name string, raw bool) {
	t.Helper()
	headers := &iceberg.ListType{ElementID: 1, ElementRequired: true, Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
		{ID: 2, Name: "key", Type: iceberg.PrimitiveTypes.String, Required: true},
		{ID: 3, Name: "value", Type: iceberg.PrimitiveTypes.Binary}}}}
	alterForeign(t, st, name, func(u *table.UpdateSchema) *table.UpdateSchema {
		u = u.AddColumn([]string{"kafka_topic"}, iceberg.PrimitiveTypes.String, "", false, nil).
			AddColumn([]string{"kafka_partition"}, iceberg.PrimitiveTypes.Int32, "", false, nil).
			AddColumn([]string{"kafka_offset"}, iceberg.PrimitiveTypes.Int64, "", false, nil).
			AddColumn([]string{"kafka_timestamp"}, iceberg.PrimitiveTypes.TimestampTz, "", false, nil).
			AddColumn([]string{"kafka_key"}, iceberg.PrimitiveTypes.Binary, "", false, nil).
			AddColumn([]string{"kafka_headers"}, headers, "", false, nil)
		if raw {
			u = u.AddColumn([]string{"value"}, iceberg.PrimitiveTypes.Binary, "", false, nil)
		}
		return u
	})
}

// A table another tool created is refused with every column it lacks,
// and once it has them takes the layout --value gives, recorded with the
// first commit (it was told that a table keeps the layout it was created
// with, and sent to floe drop).
func TestSinkForeignTable(t *testing.T) {
	st, loc := sinkStack(t)
	sink := func(args ...string) (int, string, string) {
		return floe(t, append(append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "ext.orders", "--stop-at-end"}, args...), loc...)...)
	}
	createForeignOrders(t, st, "ext.orders")
	// A row the other tool wrote before floe.
	before := foreignTable(t, st.Catalog(), "ext.orders")
	sc, err := table.SchemaToArrowSchema(before.Schema(), nil, false, false)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(`[{"order_id":1001,"status":"kc","customer":1,"ts":"2024-05-01T10:00:00Z"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := before.AppendTable(t.Context(), array.NewTableFromRecords(sc, []arrow.RecordBatch{rec}), 1, nil); err != nil {
		t.Fatal(err)
	}

	code, _, errs := sink("--value", "json")
	want := "table ext.orders cannot hold floe rows: it lacks floe's columns kafka_topic string, kafka_partition int, kafka_offset long, kafka_timestamp timestamptz, kafka_key binary, kafka_headers list<struct<key: string not null, value: binary> not null>: add them"
	if code != 2 || !strings.Contains(errs, want) || !strings.Contains(errs, "Sinking into a table another tool created") {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errs, want)
	}

	addFloeColumns(t, st, "ext.orders", false)
	code, _, errs = sink("--value", "json")
	if want := `column "order_id" is required and floe does not write it (make it optional)`; code != 2 || !strings.Contains(errs, want) || strings.Contains(errs, "floe drop") {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errs, want)
	}
	if n := snapshotCount(t, st, "ext.orders"); n != 1 {
		t.Fatalf("refused runs committed %d snapshots beside the other tool's", n-1)
	}

	alterForeign(t, st, "ext.orders", func(u *table.UpdateSchema) *table.UpdateSchema {
		return u.UpdateColumn([]string{"order_id"}, table.ColumnUpdate{Required: iceberg.Optional[bool]{Val: false, Valid: true}})
	})
	if out := mustFloe(t, append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "ext.orders", "--stop-at-end", "--value", "json"}, loc...)...); !strings.Contains(out, "300 rows") {
		t.Fatalf("stdout %q: want 300 rows", out)
	}
	tbl := foreignTable(t, st.Catalog(), "ext.orders")
	if v := tbl.Properties()["floe.value"]; v != "json" {
		t.Fatalf("floe.value = %q, want json recorded by the first commit", v)
	}
	// The other tool's row is not floe's.
	if code, kinds := auditKinds(t, append([]string{"--table", "ext.orders"}, loc...)...); code != exitFindings || !slices.Equal(kinds, []string{"foreign-file"}) {
		t.Fatalf("audit: exit %d, %v; want the other tool's file reported", code, kinds)
	}
	// The layout is recorded: a raw sink now is refused for it.
	code, _, errs = sink("--value", "raw")
	if want := "keeps its values as json, not raw"; code != 2 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errs, want)
	}
}

// A raw sink into a table another tool partitioned by a column floe does
// not fill is refused before anything is committed (it committed its
// first, empty snapshot, then failed to write the rows: "failed to find
// source column").
func TestSinkForeignSpecFloeCannotFill(t *testing.T) {
	st, loc := sinkStack(t)
	sink := func(args ...string) (int, string, string) {
		return floe(t, append(append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "ext.raw", "--stop-at-end"}, args...), loc...)...)
	}
	createForeignOrders(t, st, "ext.raw")
	alterForeign(t, st, "ext.raw", func(u *table.UpdateSchema) *table.UpdateSchema {
		return u.UpdateColumn([]string{"order_id"}, table.ColumnUpdate{Required: iceberg.Optional[bool]{Val: false, Valid: true}})
	})
	addFloeColumns(t, st, "ext.raw", true)

	code, _, errs := sink()
	want := `partition spec "day(ts)" on table ext.raw: ts_day: the table's partition spec partitions by ts, which floe does not fill in a table of raw values`
	if code != 2 || !strings.Contains(errs, want) || !strings.Contains(errs, "--partition-by none") {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errs, want)
	}
	if n := snapshotCount(t, st, "ext.raw"); n != 0 {
		t.Fatalf("refused run committed %d snapshots", n)
	}
	if code, out, errs := sink("--partition-by", "none"); code != 0 || !strings.Contains(out, "300 rows") {
		t.Fatalf("--partition-by none: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// floe drop refuses a table floe never wrote: its advice once sent users
// to drop one, which then failed with "cannot hold floe rows".
func TestDropForeignTable(t *testing.T) {
	st, loc := sinkStack(t)
	createForeignOrders(t, st, "ext.kept")
	code, _, errs := floe(t, append([]string{"drop", "--table", "ext.kept", "--yes"}, loc...)...)
	if want := "table ext.kept is not floe's: another tool created it and floe never wrote it"; code != 2 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errs, want)
	}
	foreignTable(t, st.Catalog(), "ext.kept")
}
