package floetest

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// The helpers below change an upsert table keyed by kafka_key the way
// another writer could, through iceberg-go directly, in snapshots that are
// not floe commits: what the audit of an upsert table must find.

// ForeignDeleteKeys commits equality deletes of keys (kafka_key values) on
// the table's identifier fields: the keys' rows vanish behind floe's back.
func ForeignDeleteKeys(t testing.TB, tbl *snapshot.Table, keys ...string) {
	t.Helper()
	ice := tbl.Iceberg()
	ids := ice.Schema().IdentifierFieldIDs
	sel, err := ice.Schema().Select(true, mapping.ColKey)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := table.SchemaToArrowSchema(sel, nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	var col arrow.Array
	switch sc.Field(0).Type.ID() {
	case arrow.STRING:
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.AppendValues(keys, nil)
		col = b.NewArray()
	default:
		b := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
		for _, k := range keys {
			b.Append([]byte(k))
		}
		col = b.NewArray()
	}
	batch := array.NewRecordBatch(sc, []arrow.Array{col}, int64(len(keys)))
	col.Release()
	txn := ice.NewTransaction()
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(batch, nil) }
	if err := txn.CommitEqualityDeletes(t.Context(), ids, one, nil); err != nil {
		t.Fatal(err)
	}
	commitRefresh(t, tbl, txn)
}

// ForeignAddRecords adds the rows a sink would make of recs in a data file
// of a snapshot that is not a floe commit (AddFiles), with no delete: a
// row of an older record of a key that has a row comes back beside it.
func ForeignAddRecords(t testing.TB, tbl *snapshot.Table, recs ...*kgo.Record) {
	t.Helper()
	var paths []string
	for _, df := range RecordFiles(t, tbl, recs...) {
		paths = append(paths, df.FilePath())
	}
	txn := tbl.Iceberg().NewTransaction()
	if err := txn.AddFiles(t.Context(), paths, nil, false); err != nil {
		t.Fatal(err)
	}
	commitRefresh(t, tbl, txn)
}

// RecordFiles writes the rows a sink would make of recs into data files of
// tbl, committed by nothing, and returns them.
func RecordFiles(t testing.TB, tbl *snapshot.Table, recs ...*kgo.Record) []iceberg.DataFile {
	t.Helper()
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for _, r := range recs {
		rb.Append(r)
	}
	batch := rb.NewBatch()
	defer batch.Release()
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(batch, nil) }
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(t.Context(), tbl.Iceberg(), tbl.ArrowSchema(), one) {
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, df)
	}
	return files
}

// DropDeleteFile removes the live equality-delete file that floe snapshot
// addedBy added (the first one when it added several) in a snapshot that
// is not a floe commit, and returns its path: the rows it deleted are live
// again.
func DropDeleteFile(t testing.TB, tbl *snapshot.Table, addedBy int64) string {
	t.Helper()
	ice := tbl.Iceberg()
	fs, err := ice.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := ice.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		if m.ManifestContent() != iceberg.ManifestContentDeletes {
			continue
		}
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.SnapshotID() != addedBy || e.DataFile().ContentType() != iceberg.EntryContentEqDeletes {
				continue
			}
			txn := ice.NewTransaction()
			if err := txn.ReplaceFiles(t.Context(), nil, nil, []iceberg.DataFile{e.DataFile()}, nil); err != nil {
				t.Fatal(err)
			}
			commitRefresh(t, tbl, txn)
			return e.DataFile().FilePath()
		}
	}
	t.Fatalf("snapshot %d added no equality-delete file that is live", addedBy)
	return ""
}

func commitRefresh(t testing.TB, tbl *snapshot.Table, txn *table.Transaction) {
	t.Helper()
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
}
