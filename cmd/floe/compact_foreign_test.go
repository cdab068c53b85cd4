package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// foreignTable loads table name with iceberg-go alone, as another writer
// would (for its transactions, or to read its metadata).
func foreignTable(t *testing.T, cfg catalog.Config, name string) *table.Table {
	t.Helper()
	cat, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	tbl, err := cat.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// foreignDelete deletes table name's rows that filter matches as another
// writer, in write.delete.mode mode.
func foreignDelete(t *testing.T, cfg catalog.Config, name string, filter iceberg.BooleanExpression, mode string) {
	t.Helper()
	tx := foreignTable(t, cfg, name).NewTransaction()
	if err := tx.SetProperties(iceberg.Properties{table.WriteDeleteModeKey: mode}); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	tx = foreignTable(t, cfg, name).NewTransaction()
	if err := tx.Delete(t.Context(), filter, nil); err != nil {
		t.Fatalf("foreign delete on %s: %v", name, err)
	}
	if _, err := tx.Commit(t.Context()); err != nil {
		t.Fatalf("foreign delete commit on %s: %v", name, err)
	}
}

// auditKinds runs floe audit --json with args and returns its exit code
// and its findings' kinds.
func auditKinds(t *testing.T, args ...string) (int, []string) {
	t.Helper()
	code, out, errs := floe(t, append([]string{"audit", "--json"}, args...)...)
	var rep struct {
		Findings []struct{ Kind string } `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("audit %v: exit %d, %v\n%s", args, code, err, errs)
	}
	var kinds []string
	for _, f := range rep.Findings {
		kinds = append(kinds, f.Kind)
	}
	return code, kinds
}

// TestCompactLeavesForeignFiles (from a review): another writer replaces
// the row at offset 4 of an append table with one of another value (a
// copy-on-write delete, then an append). The default audit reports its
// files; a compaction (floe maintain, or a live sink's scheduled one)
// merged them with floe's, their offsets lying on the ledger's chain, and
// every level but the content one then said complete, that one too once
// retention took the records. It leaves another writer's files alone, and
// the audit keeps reporting them.
func TestCompactLeavesForeignFiles(t *testing.T) {
	st := topicStack(t, "raw")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	for r := range 3 {
		var recs []*kgo.Record
		for i := range 5 {
			recs = append(recs, &kgo.Record{Topic: "raw", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d-%d", r, i)})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
		mustFloe(t, slices.Concat([]string{"sink", "-t", "raw", "--table", "lake.raw", "--stop-at-end", "-b", st.Brokers[0]}, cat)...)
	}
	one, err := foreignTable(t, cfg, "lake.raw").Scan(table.WithRowFilter(iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), int64(4)))).ToArrowTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Release()
	cols := make([]arrow.Array, one.NumCols())
	for i := range cols {
		if one.Column(i).Name() == mapping.ColValue {
			bb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
			bb.Append([]byte("forged"))
			cols[i] = bb.NewArray()
			continue
		}
		cols[i] = one.Column(i).Data().Chunk(0)
	}
	forged := array.NewRecordBatch(one.Schema(), cols, 1)
	foreignDelete(t, cfg, "lake.raw", iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), int64(4)), table.WriteModeCopyOnWrite)
	tx := foreignTable(t, cfg, "lake.raw").NewTransaction()
	if err := tx.Append(t.Context(), array.NewTableReader(array.NewTableFromRecords(one.Schema(), []arrow.RecordBatch{forged}), 1), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	before, kinds := auditKinds(t, slices.Concat([]string{"--table", "lake.raw"}, cat)...)
	if before != exitFindings || !slices.Contains(kinds, "foreign-file") {
		t.Fatalf("before compaction: exit %d, %v; want the other writer's files reported", before, kinds)
	}
	out := mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.raw", "--compact"}, cat)...)
	t.Log(out)
	for _, lvl := range [][]string{nil, {"--deep"}} {
		code, kinds := auditKinds(t, slices.Concat([]string{"--table", "lake.raw"}, lvl, cat)...)
		if code != exitFindings || !slices.Contains(kinds, "foreign-file") {
			t.Errorf("after compaction, audit %v: exit %d, %v; want the other writer's files still reported", lvl, code, kinds)
		}
	}
}

// TestCompactRefusesForeignDeletes (from a review): another writer
// deletes key k3 of an upsert table merge-on-read. The default audit
// reports its delete file; a compaction applied it with floe's own and
// dropped it, and every level said complete though k3's latest record is
// an upsert. The compaction refuses, naming the snapshot, and the audit
// keeps reporting it.
func TestCompactRefusesForeignDeletes(t *testing.T) {
	st := topicStack(t, "acc")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	sink := slices.Concat([]string{"sink", "-t", "acc", "--table", "lake.acc", "--mode", "upsert", "--key", "string", "--stop-at-end", "-b", st.Brokers[0]}, cat)
	for r := range 2 {
		var recs []*kgo.Record
		for k := range 10 {
			recs = append(recs, &kgo.Record{Topic: "acc", Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "v%d-%d", k, r)})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
		mustFloe(t, sink...)
	}
	foreignDelete(t, cfg, "lake.acc", iceberg.EqualTo(iceberg.Reference(mapping.ColKey), "k3"), table.WriteModeMergeOnRead)
	if code, kinds := auditKinds(t, slices.Concat([]string{"--table", "lake.acc"}, cat)...); code != exitFindings {
		t.Fatalf("before compaction: exit %d, %v; want the other writer's delete reported", code, kinds)
	}
	code, _, errs := floe(t, slices.Concat([]string{"maintain", "--table", "lake.acc", "--compact"}, cat)...)
	if code != exitError || !strings.Contains(errs, ", not floe's, added delete file") {
		t.Errorf("maintain --compact: exit %d, %q; want it refused, naming the other writer's snapshot", code, errs)
	}
	if code, kinds := auditKinds(t, slices.Concat([]string{"--table", "lake.acc", "--deep"}, cat)...); code != exitFindings {
		t.Errorf("after the compaction: exit %d, %v; want the other writer's delete still reported", code, kinds)
	}
}

// TestDeadLetterForeignDeleteMergeOnRead (from a review): another writer
// deletes a dead letter of a dead-letter table whose write.delete.mode is
// merge-on-read (other engines' default). The sink replaces the short
// commit's rows by its files; its delete followed the table's mode, wrote
// a position delete and kept the file live, and adding the file again
// failed: every sink and floe maintain exited 2 from then on. It deletes
// copy-on-write: the sink goes on, the dead letter is back, and the
// table's mode is left as it was.
func TestDeadLetterForeignDeleteMergeOnRead(t *testing.T) {
	st := topicStack(t, "shop")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	produce := func(vals ...string) {
		var recs []*kgo.Record
		for _, v := range vals {
			recs = append(recs, &kgo.Record{Topic: "shop", Value: []byte(v)})
		}
		if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
			t.Fatal(err)
		}
	}
	produce(`{"qty":1}`, `{"qty":2}`, "not json 0", "not json 1", "not json 2")
	sink := slices.Concat([]string{"sink", "-t", "shop", "--table", "lake.shop", "--value", "json", "--stop-at-end", "-b", st.Brokers[0]}, cat)
	mustFloe(t, sink...)
	foreignDelete(t, cfg, "lake.shop_dlq", iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), int64(3)), table.WriteModeMergeOnRead)
	produce("still not json")
	mustFloe(t, sink...)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.shop"}, cat)...)
	dlq := foreignTable(t, cfg, "lake.shop_dlq")
	rows, err := dlq.Scan(table.WithSelectedFields(mapping.ColOffset)).ToArrowTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Release()
	if rows.NumRows() != 4 || dlq.Properties()[table.WriteDeleteModeKey] != table.WriteModeMergeOnRead {
		t.Errorf("dead-letter table: %d rows, want 4; write.delete.mode %q", rows.NumRows(), dlq.Properties()[table.WriteDeleteModeKey])
	}
	if code, kinds := auditKinds(t, slices.Concat([]string{"--table", "lake.shop", "--deep"}, cat)...); code != exitOK {
		t.Errorf("audit: exit %d, %v", code, kinds)
	}
}
