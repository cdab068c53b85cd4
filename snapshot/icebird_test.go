package snapshot_test

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/internal/testenv"
)

// keyedChanges builds, with iceberg-go alone, an unpartitioned format-v2
// table keyed by its required string column id (the schema's identifier
// field) and commits `commits` row deltas of random upserts and deletes
// over `keys` keys: each one snapshot holding a data file with the latest
// row of every key it upserts and an equality-delete file with every key
// it touches, the shape of an upsert table's commits. It returns the table
// and the fold: the value each live key must have.
func keyedChanges(t testing.TB, cat icecat.Catalog, name string, commits, keys int, seed uint64, props iceberg.Properties) (*table.Table, map[string]int64) {
	t.Helper()
	ctx := t.Context()
	sc := iceberg.NewSchemaWithIdentifiers(0, []int{1},
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 2, Name: "v", Type: iceberg.PrimitiveTypes.Int64},
	)
	if err := cat.CreateNamespace(ctx, table.Identifier{"ib"}, nil); err != nil && !errors.Is(err, icecat.ErrNamespaceAlreadyExists) {
		t.Fatal(err)
	}
	props = maps.Clone(props)
	if props == nil {
		props = iceberg.Properties{}
	}
	props[table.PropertyFormatVersion] = "2"
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ib", name}, sc, icecat.WithProperties(props))
	if err != nil {
		t.Fatal(err)
	}
	arrowSc, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	keySc, err := table.SchemaToArrowSchema(iceberg.NewSchema(0, sc.Field(0)), nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	want := map[string]int64{}
	for c := range commits {
		latest := map[string]*int64{} // nil: deleted
		for range keys / 4 {
			k := fmt.Sprintf("k%04d", rng.IntN(keys))
			if rng.IntN(5) == 0 {
				latest[k] = nil
				continue
			}
			v := int64(c*100000 + rng.IntN(100000))
			latest[k] = &v
		}
		ids := slices.Sorted(maps.Keys(latest))
		rows := array.NewRecordBuilder(memory.DefaultAllocator, arrowSc)
		dels := array.NewRecordBuilder(memory.DefaultAllocator, keySc)
		for _, k := range ids {
			dels.Field(0).(*array.StringBuilder).Append(k)
			if v := latest[k]; v != nil {
				rows.Field(0).(*array.StringBuilder).Append(k)
				rows.Field(1).(*array.Int64Builder).Append(*v)
				want[k] = *v
			} else {
				delete(want, k)
			}
		}
		rb, db := rows.NewRecordBatch(), dels.NewRecordBatch()
		rows.Release()
		dels.Release()
		txn := tbl.NewTransaction()
		var added []iceberg.DataFile
		for df, err := range table.WriteRecords(ctx, tbl, arrowSc, one(rb)) {
			if err != nil {
				t.Fatal(err)
			}
			added = append(added, df)
		}
		deletes, err := txn.WriteEqualityDeletes(ctx, []int{1}, one(db))
		if err != nil {
			t.Fatal(err)
		}
		if err := txn.NewRowDelta(nil).AddRows(added...).AddDeletes(deletes...).Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if tbl, err = txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		rb.Release()
		db.Release()
	}
	return tbl, want
}

// one yields a single record batch.
func one(b arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) { yield(b, nil) }
}

// scanKeyed reads id -> v with iceberg-go's scan (deletes applied), failing
// on a key read twice.
func scanKeyed(t testing.TB, tbl *table.Table) map[string]int64 {
	t.Helper()
	at, err := tbl.Scan(table.WithSelectedFields("id", "v")).ToArrowTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	got := map[string]int64{}
	tr := array.NewTableReader(at, 0)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		ids := rec.Column(0).(*array.String)
		vs := rec.Column(1).(*array.Int64)
		for i := range int(rec.NumRows()) {
			if _, dup := got[ids.Value(i)]; dup {
				t.Fatalf("iceberg-go scan: key %s read twice", ids.Value(i))
			}
			got[ids.Value(i)] = vs.Value(i)
		}
	}
	return got
}

// icebirdKeyed reads id -> v with icebird, failing on a key read twice.
func icebirdKeyed(t testing.TB, ib *testenv.Icebird, tbl *table.Table) map[string]int64 {
	t.Helper()
	rows, err := ib.Read(t.Context(), tbl.MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		id, _ := r["id"].(string)
		v, err := r["v"].(interface{ Int64() (int64, error) }).Int64()
		if err != nil {
			t.Fatalf("icebird: row %v: %v", r, err)
		}
		if _, dup := got[id]; dup {
			t.Fatalf("icebird: key %s read twice", id)
		}
		got[id] = v
	}
	return got
}

// diffKeyed describes how got differs from want, or returns "".
func diffKeyed(want, got map[string]int64) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			diffs = append(diffs, fmt.Sprintf("%s: want %d, got %d (present %v)", k, want[k], g, ok))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: deleted, got %d", k, got[k]))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("%d keys differ, first: %s", len(diffs), diffs[:min(5, len(diffs))])
}

// TestIcebirdReadsEqualityDeletes: icebird, a reader outside Go, reads a
// table of keyed changes written with iceberg-go's equality deletes and
// row deltas exactly as iceberg-go's scan does, and both equal the fold.
func TestIcebirdReadsEqualityDeletes(t *testing.T) {
	ib := testenv.NewIcebird(t)
	tbl, want := keyedChanges(t, tempCatalog(t), "changes", 12, 400, 7, nil)
	if len(want) == 0 {
		t.Fatal("the fold is empty")
	}
	scanned := scanKeyed(t, tbl)
	if d := diffKeyed(want, scanned); d != "" {
		t.Fatalf("iceberg-go scan vs fold: %s", d)
	}
	if d := diffKeyed(want, icebirdKeyed(t, ib, tbl)); d != "" {
		t.Fatalf("icebird vs fold: %s", d)
	}
}
