package snapshot_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// groupFlush streams rows of partitions 0 and 1 (offsets 0-4 each) into
// one file of a Writer, and returns the flush committing it as one file
// group holding spans, with ranges [0, 5) of both partitions.
func groupFlush(t *testing.T, tbl *snapshot.Table, spans ...mapping.Span) snapshot.Flush {
	t.Helper()
	return streamFlush(t, tbl, []mapping.Span{groupSpan(0, 0, 5), groupSpan(1, 0, 5)}, spans...)
}

// streamFlush streams the rows of rows (each span's offsets) into one
// Writer stream, as a sink's lane does, and returns the flush committing
// them as one file group holding spans, with a range per span of rows.
func streamFlush(t *testing.T, tbl *snapshot.Table, rows []mapping.Span, spans ...mapping.Span) snapshot.Flush {
	t.Helper()
	w, err := tbl.NewWriter(tbl.Iceberg(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for _, s := range rows {
		for o := s.Low; o < s.High; o++ {
			rb.Append(testRec{partition: s.Partition, offset: o, key: "k", value: "v"}.kgo())
		}
	}
	st := w.Stream(t.Context(), tbl.ArrowSchema())
	if err := st.Write(rb.NewBatch()); err != nil {
		t.Fatal(err)
	}
	files, err := st.Close()
	if err != nil {
		t.Fatal(err)
	}
	f := snapshot.Flush{Writer: w, Files: map[mapping.TopicPartition][]iceberg.DataFile{}, Groups: []snapshot.WrittenGroup{{Files: files, Spans: spans}}}
	for _, s := range rows {
		f.Ranges = append(f.Ranges, mapping.Range{TopicPartition: s.TopicPartition, Interval: s.Interval, Records: s.High - s.Low})
	}
	return f
}

func groupSpan(p int32, low, high int64) mapping.Span {
	return mapping.Span{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: p}, Interval: mapping.Interval{Low: low, High: high}}
}

// TestCommitFileGroups: a flush whose streamed file holds two partitions
// commits as one file group of the ledger, and its rows read back; a
// group holding offsets outside the flush's ranges, or rows of a partition
// that has files of its own too, is refused before anything is committed.
func TestCommitFileGroups(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.groups", snapshot.OpenOptions{Create: true})

	bad := groupFlush(t, tbl, groupSpan(0, 0, 5), groupSpan(1, 0, 6))
	_, err := tbl.Commit(t.Context(), bad, snapshot.CommitOptions{Writer: "test"})
	if err == nil || !strings.Contains(err.Error(), "t/1 [0, 6), which no range of the flush with rows covers") {
		t.Fatalf("err %v, want the span outside the ranges named", err)
	}
	tbl.RemoveFiles(t.Context(), nil, bad.DataFiles())

	both := groupFlush(t, tbl, groupSpan(0, 0, 5), groupSpan(1, 0, 5))
	both.Files[mapping.TopicPartition{Topic: "t", Partition: 1}] = both.Groups[0].Files
	if _, err := tbl.Commit(t.Context(), both, snapshot.CommitOptions{Writer: "test"}); err == nil || !strings.Contains(err.Error(), "in a file group and in files of their own") {
		t.Fatalf("err %v, want a partition in a group and in files of its own refused", err)
	}
	tbl.RemoveFiles(t.Context(), nil, both.Groups[0].Files)
	if tbl.Head() != nil {
		t.Fatal("a refused flush was committed")
	}

	f := groupFlush(t, tbl, groupSpan(0, 0, 5), groupSpan(1, 0, 5))
	res := commitFlush(t, tbl, f)
	if res.Files != 1 || res.Rows != 10 {
		t.Fatalf("committed %d files, %d rows; want 1 file of 10 rows", res.Files, res.Rows)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	c := l.Commits[len(l.Commits)-1]
	if len(c.FileGroups) != 1 || c.FileGroups[0].Files[0] != f.Groups[0].Files[0].FilePath() || len(c.FileGroups[0].Spans) != 2 {
		t.Fatalf("ledger groups %+v, want the flush's group", c.FileGroups)
	}
	if rows := snapshotRows(t, tbl, 0); len(rows) != 10 {
		t.Fatalf("rows %q, want 10", rows)
	}
	file, ok, err := tbl.RowAt(t.Context(), 0, mapping.TopicPartition{Topic: "t", Partition: 1}, 3, c)
	if err != nil || !ok || file != c.FileGroups[0].Files[0] {
		t.Fatalf("RowAt: %s %v %v, want the group's file", file, ok, err)
	}
}
