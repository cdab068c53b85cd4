package snapshot_test

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// scanTable commits two snapshots of 3 partitions with 100 rows each, one
// data file per partition and snapshot.
func scanTable(t *testing.T) *snapshot.Table {
	t.Helper()
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{Catalog: filepath.Join(dir, "c.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := snapshot.Open(t.Context(), cat, []string{"lake", "scan"}, snapshot.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for c := range int64(2) {
		f := snapshot.Flush{Batches: map[mapping.TopicPartition][]arrow.RecordBatch{}}
		for p := range int32(3) {
			tp := mapping.TopicPartition{Topic: "t", Partition: p}
			rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
			if err != nil {
				t.Fatal(err)
			}
			for o := c * 100; o < (c+1)*100; o++ {
				rb.Append(&kgo.Record{Topic: "t", Partition: p, Offset: o, Value: []byte("v")})
			}
			f.Batches[tp] = []arrow.RecordBatch{rb.NewBatch()}
			rb.Release()
			f.Ranges = append(f.Ranges, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: c * 100, High: (c + 1) * 100}, Records: 100})
		}
		if _, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

func TestScanFiles(t *testing.T) {
	tbl := scanTable(t)
	rows, done := map[string]int64{}, map[string]int{}
	err := tbl.ScanFiles(t.Context(), 0, snapshot.ScanOptions{Columns: []string{mapping.ColPartition, mapping.ColOffset}, Concurrency: 2},
		func(fb snapshot.FileBatch) error {
			if done[fb.Path] > 0 {
				t.Errorf("%s: call after its Done", fb.Path)
			}
			if fb.Done {
				done[fb.Path]++
				return nil
			}
			if n := fb.Batch.NumCols(); n != 2 {
				t.Errorf("%s: %d columns read, want the 2 selected", fb.Path, n)
			}
			rows[fb.Path] += fb.Batch.NumRows()
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 6 || len(rows) != 6 {
		t.Fatalf("%d files done, %d with rows; want 6", len(done), len(rows))
	}
	for p, n := range rows {
		if n != 100 || done[p] != 1 {
			t.Fatalf("%s: %d rows, %d Done calls", p, n, done[p])
		}
	}

	// A filter prunes files and rows.
	var n int64
	filter := iceberg.NewAnd(iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), int32(1)),
		iceberg.GreaterThanEqual(iceberg.Reference(mapping.ColOffset), int64(150)))
	err = tbl.ScanFiles(t.Context(), 0, snapshot.ScanOptions{Columns: []string{mapping.ColOffset}, Filter: filter}, func(fb snapshot.FileBatch) error {
		if !fb.Done {
			n += fb.Batch.NumRows()
		}
		return nil
	})
	if err != nil || n != 50 {
		t.Fatalf("filtered scan: %d rows, err %v; want 50", n, err)
	}

	// An error from the callback stops the scan and is returned.
	stop := errors.New("stop")
	if err := tbl.ScanFiles(t.Context(), 0, snapshot.ScanOptions{}, func(snapshot.FileBatch) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("err %v, want the callback's", err)
	}
	if err := tbl.ScanFiles(t.Context(), 42, snapshot.ScanOptions{}, func(snapshot.FileBatch) error { return nil }); err == nil {
		t.Fatal("scan of an unknown snapshot succeeded")
	}
}

// TestScanPositions: the positions of the rows in the spans, and only
// those: a span's offsets of its own partition, across snapshots' files,
// none of a topic the table does not hold, none without spans.
func TestScanPositions(t *testing.T) {
	tbl := scanTable(t)
	spans := map[mapping.TopicPartition]mapping.Interval{
		{Topic: "t", Partition: 0}: {Low: 50, High: 150},
		{Topic: "t", Partition: 2}: {Low: 190, High: 250},
		{Topic: "u", Partition: 1}: {Low: 0, High: 200},
	}
	got := map[mapping.TopicPartition][]int64{}
	err := tbl.ScanPositions(t.Context(), 0, spans, snapshot.PositionOptions{}, func(tp mapping.TopicPartition, off int64) {
		got[tp] = append(got[tp], off)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[mapping.TopicPartition]mapping.Interval{
		{Topic: "t", Partition: 0}: {Low: 50, High: 150},
		{Topic: "t", Partition: 2}: {Low: 190, High: 200},
	}
	if len(got) != len(want) {
		t.Fatalf("positions of %d partitions, want %d: %v", len(got), len(want), got)
	}
	for tp, in := range want {
		offs := got[tp]
		slices.Sort(offs)
		if int64(len(offs)) != in.Len() || offs[0] != in.Low || offs[len(offs)-1] != in.High-1 || len(slices.Compact(offs)) != len(offs) {
			t.Errorf("%s: %d positions from %v, want each of %s once", tp, len(offs), offs[:min(3, len(offs))], in)
		}
	}
	err = tbl.ScanPositions(t.Context(), 0, nil, snapshot.PositionOptions{}, func(tp mapping.TopicPartition, off int64) {
		t.Errorf("no spans: position %s@%d", tp, off)
	})
	if err != nil {
		t.Errorf("no spans: %v", err)
	}
}
