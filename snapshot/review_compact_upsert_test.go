package snapshot_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewTruncateAfterCompactionSplitFile: a compaction of an upsert
// table writes large files (512 MiB by default) of several row groups;
// iceberg-go's scan plans such a file as several tasks (one per split of
// read.split.target-size, 128 MiB by default). A truncate
// (--on-truncate delete-all) lists the live data files from those tasks
// (liveDataFiles), one file several times, and iceberg-go's
// ReplaceDataFilesWithDataFiles refuses duplicate paths: the truncate can
// never commit. The sizes are scaled down with the two standard table
// properties.
func TestReviewTruncateAfterCompactionSplitFile(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.uptrunc", snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	var recs []testRec
	for i := range 40 {
		recs = append(recs, testRec{0, int64(i), fmt.Sprintf("k%02d", i), fmt.Sprintf("value-%03d-%s", i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), 0})
	}
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 40}}, recs...)
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 40, High: 41}}, testRec{0, 40, "k00", "new", 0})
	if err := tbl.SetProperties(t.Context(), map[string]string{
		"write.parquet.row-group-limit": "8",
		"read.split.target-size":        "512",
	}); err != nil {
		t.Fatal(err)
	}
	res, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20})
	if err != nil || res.SnapshotID == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	f := flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 41, High: 43}}, testRec{0, 42, "k99", "after", 0})
	f.Truncated = map[mapping.TopicPartition]int64{{Topic: "t", Partition: 0}: 41}
	f.Ranges[0].Deletes = 1
	if _, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"}); err != nil {
		t.Fatalf("truncate after a compaction: %v", err)
	}
	if got := joinLines(snapshotRows(t, tbl, 0)); got != "0/042 k99=after" {
		t.Fatalf("after the truncate:\n%s", got)
	}
}

// TestReviewTruncateOnFormatV3: an upsert table of format version 3
// (--format-version 3) cannot take a truncate (--on-truncate
// delete-all): its commit replaces every live data file
// (ReplaceDataFilesWithDataFiles), or adds the flush's rows alone when the
// table holds none (AddDataFiles), with data files written without
// first_row_id, which iceberg-go requires of those operations on v3 (a
// row delta assigns it): the commit failed at every attempt and the sink
// stopped on the same record at every run. The commit refuses it at once
// now (ErrTruncateFormat), and the sink before it starts.
func TestReviewTruncateOnFormatV3(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.uptrunc3", snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert,
		Properties: map[string]string{"format-version": "3"}})
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 2}}, testRec{0, 0, "k1", "a", 0}, testRec{0, 1, "k2", "b", 0})
	f := flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 2, High: 4}}, testRec{0, 3, "k3", "c", 0})
	f.Truncated = map[mapping.TopicPartition]int64{{Topic: "t", Partition: 0}: 2}
	f.Ranges[0].Deletes = 1
	if _, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"}); !errors.Is(err, snapshot.ErrTruncateFormat) {
		t.Fatalf("truncate of a v3 upsert table: %v; want ErrTruncateFormat", err)
	}
	if got := joinLines(snapshotRows(t, tbl, 0)); got != "0/000 k1=a\n0/001 k2=b" {
		t.Fatalf("after the refused truncate:\n%s", got)
	}
}
