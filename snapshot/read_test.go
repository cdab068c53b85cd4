package snapshot_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// lookupTable: partition 0 holds offsets 0-2, 4-7 (3 is a marker) in two
// commits, partition 1 offsets 0-1. Timestamps of partition 0 are out of
// order: offset 2 is at +50 s, the others at +offset s.
func lookupTable(t *testing.T) (*snapshot.Table, int64) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.lookup", snapshot.OpenOptions{Create: true})
	iv := func(lo, hi int64) mapping.Interval { return mapping.Interval{Low: lo, High: hi} }
	commitRecs(t, tbl, map[int32]mapping.Interval{0: iv(0, 5), 1: iv(0, 2)},
		testRec{0, 0, "a", "x", 0}, testRec{0, 1, "b", "x", 0}, testRec{0, 2, "c", "x", 50}, testRec{0, 4, "d", "x", 0},
		testRec{1, 0, "a", "y", 0}, testRec{1, 1, "b", "y", 0})
	first := tbl.Head().SnapshotID
	commitRecs(t, tbl, map[int32]mapping.Interval{0: iv(5, 8)},
		testRec{0, 5, "e", "x", 0}, testRec{0, 6, "f", "x", 0}, testRec{0, 7, "g", "x", 0})
	return tbl, first
}

func TestRowAt(t *testing.T) {
	tbl, first := lookupTable(t)
	p0 := mapping.TopicPartition{Topic: "t", Partition: 0}
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		snap   int64
		offset int64
		ok     bool
	}{{0, 2, true}, {0, 3, false}, {0, 6, true}, {0, 8, false}, {first, 6, false}, {first, 4, true}} {
		file, ok, err := tbl.RowAt(t.Context(), c.snap, p0, c.offset, mapping.Commit{})
		if err != nil || ok != c.ok {
			t.Fatalf("RowAt(%d, %d) = %v, %v; want %v", c.snap, c.offset, ok, err, c.ok)
		}
		if ok && !slices.ContainsFunc(files, func(f snapshot.DataFile) bool {
			return f.Path == file && f.PartitionMin == 0 && f.Offsets.Contains(c.offset)
		}) {
			t.Fatalf("RowAt(%d) names file %s, whose bounds do not hold it", c.offset, file)
		}
	}
	var unknown *snapshot.UnknownSnapshotError
	if _, _, err := tbl.RowAt(t.Context(), 42, p0, 1, mapping.Commit{}); !errors.As(err, &unknown) {
		t.Fatalf("unknown snapshot: %v", err)
	}
}

func TestRowsBelowCut(t *testing.T) {
	tbl, _ := lookupTable(t)
	collect := func(cut mapping.Cut) string {
		var out []string
		err := tbl.Rows(t.Context(), 0, cut, func(b arrow.RecordBatch) error {
			out = append(out, rowStrings(b)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	p := func(n int32) mapping.TopicPartition { return mapping.TopicPartition{Topic: "t", Partition: n} }
	for _, c := range []struct {
		cut  mapping.Cut
		want string
	}{
		// Mid-range cut on 0; partition 1 is not named, so all of it.
		{mapping.Cut{p(0): 6}, "0/000 a=x 0/001 b=x 0/002 c=x 0/004 d=x 0/005 e=x 1/000 a=y 1/001 b=y"},
		{mapping.Cut{p(0): 0, p(1): 1}, "1/000 a=y"},
		{mapping.Cut{p(0): 4, p(1): 2}, "0/000 a=x 0/001 b=x 0/002 c=x 1/000 a=y 1/001 b=y"},
		{nil, "0/000 a=x 0/001 b=x 0/002 c=x 0/004 d=x 0/005 e=x 0/006 f=x 0/007 g=x 1/000 a=y 1/001 b=y"},
	} {
		if got := collect(c.cut); got != c.want {
			t.Errorf("rows below %s:\n got %s\nwant %s", c.cut, got, c.want)
		}
	}
}

func TestTimeCut(t *testing.T) {
	tbl, _ := lookupTable(t)
	p := func(n int32) mapping.TopicPartition { return mapping.TopicPartition{Topic: "t", Partition: n} }
	for _, c := range []struct {
		sec  int64
		want mapping.Cut
	}{
		{0, mapping.Cut{p(0): 0, p(1): 0}},
		// At +2 s the first record at or after it is offset 2 (at +50 s),
		// not offset 4: out-of-order timestamps count by offset order.
		{2, mapping.Cut{p(0): 2, p(1): 2}},
		{5, mapping.Cut{p(0): 2, p(1): 2}},
		{51, mapping.Cut{p(0): 8, p(1): 2}},
	} {
		got, err := tbl.TimeCut(t.Context(), 0, base.Add(time.Duration(c.sec)*time.Second))
		if err != nil || got.String() != c.want.String() {
			t.Errorf("TimeCut(+%ds) = %s, %v; want %s", c.sec, got, err, c.want)
		}
	}
}

func TestFindSnapshot(t *testing.T) {
	cat := tempCatalog(t)
	iv := mapping.Interval{Low: 0, High: 1}
	a := openTestTable(t, cat, "lake.a", snapshot.OpenOptions{Create: true})
	commitRecs(t, a, map[int32]mapping.Interval{0: iv}, testRec{0, 0, "k", "v", 0})
	b := openTestTable(t, cat, "other.b", snapshot.OpenOptions{Create: true})
	commitRecs(t, b, map[int32]mapping.Interval{0: iv}, testRec{0, 0, "k", "v", 0})
	got, err := snapshot.FindSnapshot(t.Context(), cat, b.Head().SnapshotID, a.Identifier())
	if err != nil || got.Name() != "other.b" {
		t.Fatalf("FindSnapshot = %v, %v; want other.b", got, err)
	}
	var unknown *snapshot.UnknownSnapshotError
	if _, err := snapshot.FindSnapshot(t.Context(), cat, 12345); !errors.As(err, &unknown) {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestRowsOfDeletedFile: a data file deleted from the storage behind
// floe's back makes Rows (floe as-of --rows, exports) fail with a
// *DataFileGoneError, whose hint says what to do, not iceberg-go's bare
// "file does not exist" (from a new-user run).
func TestRowsOfDeletedFile(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.gone", snapshot.OpenOptions{Create: true})
	smallFiles(t, tbl, 0, 1, 5)
	f := liveDataFiles(t, tbl)[0]
	if err := os.Remove(strings.TrimPrefix(f.Path, "file://")); err != nil {
		t.Fatal(err)
	}
	err := tbl.Rows(t.Context(), 0, nil, func(arrow.RecordBatch) error { return nil })
	if gone, ok := errors.AsType[*snapshot.DataFileGoneError](err); !ok || !strings.Contains(f.Path, gone.Path) {
		t.Fatalf("err = %v, want a DataFileGoneError naming %s", err, f.Path)
	}
}
