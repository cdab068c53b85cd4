package snapshot_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// testCatalog opens a SQLite catalog and file warehouse in a temporary folder.
func tempCatalog(t testing.TB) icecat.Catalog {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{
		Catalog:   filepath.Join(dir, "catalog.db"),
		Warehouse: filepath.Join(dir, "warehouse"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func openTestTable(t testing.TB, cat icecat.Catalog, name string, opts snapshot.OpenOptions) *snapshot.Table {
	t.Helper()
	ident, err := catalog.ParseIdent(name)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := snapshot.Open(t.Context(), cat, ident, opts)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// testRec is a record of topic "t": key "" means a null key, value "-" a
// tombstone. Its timestamp is base + sec seconds, or base + offset seconds
// when sec is 0.
type testRec struct {
	partition int32
	offset    int64
	key       string
	value     string
	sec       int64
}

var base = time.UnixMilli(1_700_000_000_000)

func (r testRec) kgo() *kgo.Record {
	sec := r.sec
	if sec == 0 {
		sec = r.offset
	}
	k := &kgo.Record{Topic: "t", Partition: r.partition, Offset: r.offset, Timestamp: base.Add(time.Duration(sec) * time.Second)}
	if r.key != "" {
		k.Key = []byte(r.key)
	}
	if r.value != "-" {
		k.Value = []byte(r.value)
	}
	return k
}

// commitRecs commits recs (one partition each, in offset order) as one flush
// whose ranges run from low to high per partition.
func commitRecs(t testing.TB, tbl *snapshot.Table, bounds map[int32]mapping.Interval, recs ...testRec) snapshot.Result {
	t.Helper()
	return commitFlush(t, tbl, flushOf(t, tbl, bounds, recs...))
}

// commitFlush commits f.
func commitFlush(t testing.TB, tbl *snapshot.Table, f snapshot.Flush) snapshot.Result {
	t.Helper()
	res, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// flushOf is the flush of recs (one partition each, in offset order) whose
// ranges run from low to high per partition, each counting its records.
func flushOf(t testing.TB, tbl *snapshot.Table, bounds map[int32]mapping.Interval, recs ...testRec) snapshot.Flush {
	t.Helper()
	f := snapshot.Flush{Batches: map[mapping.TopicPartition][]arrow.RecordBatch{}}
	builders := map[int32]*mapping.RowBuilder{}
	counts := map[int32]int64{}
	for _, r := range recs {
		rb := builders[r.partition]
		if rb == nil {
			var err error
			rb, err = mapping.NewRowBuilder(memory.DefaultAllocator, tbl.ArrowSchema())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rb.Release)
			builders[r.partition] = rb
		}
		rb.Append(r.kgo())
		counts[r.partition]++
	}
	for p, rb := range builders {
		f.Batches[mapping.TopicPartition{Topic: "t", Partition: p}] = []arrow.RecordBatch{rb.NewBatch()}
	}
	for p, iv := range bounds {
		f.Ranges = append(f.Ranges, mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: p}, Interval: iv, Records: counts[p]})
	}
	return f
}

// snapshotRows returns "partition/offset key=value" for every row of a
// snapshot (0: the branch head), sorted.
func snapshotRows(t testing.TB, tbl *snapshot.Table, snapshotID int64) []string {
	t.Helper()
	if snapshotID == 0 {
		if tbl.Head() == nil {
			return nil
		}
		snapshotID = tbl.Head().SnapshotID
	}
	_, it, err := tbl.Iceberg().Scan(table.WithSnapshotID(snapshotID)).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rowStrings(b)...)
		b.Release()
	}
	slices.Sort(out)
	return out
}

func rowStrings(b arrow.RecordBatch) []string {
	idx := func(name string) int { return b.Schema().FieldIndices(name)[0] }
	part := b.Column(idx(mapping.ColPartition)).(*array.Int32)
	off := b.Column(idx(mapping.ColOffset)).(*array.Int64)
	key := b.Column(idx(mapping.ColKey)).(*array.Binary)
	val := b.Column(idx(mapping.ColValue)).(*array.Binary)
	var out []string
	for i := range int(b.NumRows()) {
		v := string(val.Value(i))
		if val.IsNull(i) {
			v = "-"
		}
		out = append(out, fmt.Sprintf("%d/%03d %s=%s", part.Value(i), off.Value(i), key.Value(i), v))
	}
	return out
}

func joinLines(rows []string) string { return strings.Join(rows, "\n") }

// expireAllButLast expires every snapshot of w's branch but its head as
// another tool does, outside floe (no ledger archive first: the ledger is
// truncated), and reloads reload.
func expireAllButLast(t *testing.T, w, reload *snapshot.Table) {
	t.Helper()
	txn := w.Iceberg().NewTransaction()
	if err := txn.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := reload.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
}
