package snapshot_test

import (
	"slices"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// compactedFile returns the one live file the compaction res wrote.
func compactedFile(t *testing.T, tbl *snapshot.Table, res snapshot.CompactResult) snapshot.DataFile {
	t.Helper()
	var out []snapshot.DataFile
	for _, f := range liveDataFiles(t, tbl) {
		if f.AddedBy == res.SnapshotID {
			out = append(out, f)
		}
	}
	if len(out) != 1 {
		t.Fatalf("compaction %+v wrote live files %+v, want one", res, out)
	}
	return out[0]
}

// TestCompactTieredLeavesLargerOutputAlone: three compactions with new
// small files between them. The first merges 20 files (2,000 rows) into
// one; the second finds 2 new files (200 rows), fewer bytes than that
// output, and merges only them; the third merges the second's output with
// 2 new files, whose bytes are at least its own, and again leaves the
// first's output alone. Before, every compaction merged every small file,
// its own earlier output included: the second rewrote 2,200 rows and the
// third 2,400. The audit of rows is complete after each.
func TestCompactTieredLeavesLargerOutputAlone(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.tiered", snapshot.OpenOptions{Create: true})
	opts := snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: floetest.QuietLogger()}
	complete := func() {
		t.Helper()
		rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
		if err != nil || !rep.Complete() {
			t.Fatalf("audit: %v %+v", err, rep.Findings)
		}
	}
	rows := func(res snapshot.CompactResult, err error) (snapshot.CompactResult, int64) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return res, res.Rows
	}

	smallFiles(t, tbl, 0, 30, 100) // [0, 3000) of partitions 0 and 1
	first, n := rows(tbl.Compact(t.Context(), opts))
	if n != 6000 || first.Replaced != 60 {
		t.Fatalf("first compaction: %+v", first)
	}
	a := compactedFile(t, tbl, first)
	complete()

	smallFiles(t, tbl, 30, 1, 100) // [3000, 3100)
	var fresh int64
	for _, f := range liveDataFiles(t, tbl) {
		if f.AddedBy != first.SnapshotID {
			fresh += f.SizeBytes
		}
	}
	if fresh >= a.SizeBytes {
		t.Fatalf("the new files hold %d bytes, the first compaction's file %d: the test needs fewer", fresh, a.SizeBytes)
	}
	second, n := rows(tbl.Compact(t.Context(), opts))
	if n != 200 || second.Replaced != 2 || second.Added != 1 {
		t.Fatalf("second compaction rewrote %d rows (%+v), want the 200 of the 2 new files", n, second)
	}
	b := compactedFile(t, tbl, second)
	complete()

	smallFiles(t, tbl, 31, 1, 100) // [3100, 3200)
	third, n := rows(tbl.Compact(t.Context(), opts))
	if n != 400 || third.Replaced != 3 {
		t.Fatalf("third compaction rewrote %d rows (%+v), want the 400 of the second's file (%d bytes) and the 2 new files", n, third, b.SizeBytes)
	}
	live := liveDataFiles(t, tbl)
	if len(live) != 2 || !slices.ContainsFunc(live, func(f snapshot.DataFile) bool { return f.Path == a.Path }) {
		t.Fatalf("live files %+v, want the first compaction's %s and the third's", live, a.Path)
	}
	complete()
}

// compactedHistoryWithoutSegments makes table name with the 2,000 rows of
// [0, 1000) of partitions 0 and 1 compacted into one file (first), their
// commits expired into the ledger archive, flushes more flushes of 100
// records to each partition after them, and the archive's segment files
// deleted (their indexes stay); and returns it with a fresh handle.
func compactedHistoryWithoutSegments(t *testing.T, name string, flushes int) (tbl, fresh *snapshot.Table, first snapshot.CompactResult) {
	t.Helper()
	tbl = openTestTable(t, tempCatalog(t), name, snapshot.OpenOptions{Create: true})
	smallFiles(t, tbl, 0, 10, 100) // [0, 1000)
	first, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: floetest.QuietLogger()})
	if err != nil || first.Rows != 2000 {
		t.Fatalf("first compaction: %+v %v", first, err)
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	smallFiles(t, tbl, 10, flushes, 100)
	floetest.RemoveArchiveSegments(t, tbl)
	if fresh, err = snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{}); err != nil {
		t.Fatal(err)
	}
	return tbl, fresh, first
}

// TestCompactReadsNoArchivedRangeItDoesNotNeed: a compaction reads of the
// ledger only the ranges around the files it may merge. The first 2,000
// rows are compacted into one file, which is large enough to stay, their
// commits expired into the ledger archive, and the archive's segment
// files deleted (their indexes stay); 6 new small files are then merged
// by a fresh reader, while the whole ledger fails on the missing
// segment. Before, planning decoded the whole ledger and failed so.
func TestCompactReadsNoArchivedRangeItDoesNotNeed(t *testing.T) {
	tbl, fresh, first := compactedHistoryWithoutSegments(t, "lake.compact_archived", 3)
	a := compactedFile(t, tbl, first)
	rowsBefore := snapshotRows(t, fresh, 0)
	// a is at least three quarters of the target: it stays, and no
	// archived range is asked about.
	res, err := fresh.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: a.SizeBytes, Logger: floetest.QuietLogger()})
	if err != nil {
		t.Fatalf("compaction with an archive segment gone: %v", err)
	}
	if res.SnapshotID == 0 || res.Rows != 600 || res.Replaced != 6 {
		t.Fatalf("compaction: %+v, want the 6 new files of 600 rows merged", res)
	}
	if got := snapshotRows(t, fresh, 0); !slices.Equal(got, rowsBefore) {
		t.Errorf("rows changed by compaction: %d rows, want %d", len(got), len(rowsBefore))
	}
	if _, err := fresh.Ledger(); err == nil {
		t.Fatal("the whole ledger read without its archive segments")
	}
}

// TestCompactTiersByRows: new small files whose bytes (mostly Parquet
// footers) reach a compacted file's, but whose rows are a fraction of its,
// are merged among themselves; the compacted file stays. By bytes, every
// compaction of a table of tiny flushes rewrote the whole table (the
// soak: 200,000 rows rewritten every 20 s, growing).
func TestCompactTiersByRows(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.tiered_rows", snapshot.OpenOptions{Create: true})
	opts := snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: floetest.QuietLogger()}
	smallFiles(t, tbl, 0, 30, 20) // [0, 600) of partitions 0 and 1
	first, err := tbl.Compact(t.Context(), opts)
	if err != nil || first.Rows != 1200 {
		t.Fatalf("first compaction: %+v %v", first, err)
	}
	a := compactedFile(t, tbl, first)
	smallFiles(t, tbl, 120, 4, 5) // [600, 620): 8 files of 5 rows
	var freshBytes int64
	for _, f := range liveDataFiles(t, tbl) {
		if f.AddedBy != first.SnapshotID {
			freshBytes += f.SizeBytes
		}
	}
	if freshBytes < a.SizeBytes {
		t.Fatalf("the new files hold %d bytes, the compacted file %d: the test needs them to outweigh it in bytes", freshBytes, a.SizeBytes)
	}
	second, err := tbl.Compact(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if second.Rows != 40 || second.Replaced != 8 {
		t.Fatalf("second compaction rewrote %d rows (%+v), want the 40 of the 8 new files, the compacted file (%d rows) left alone", second.Rows, second, a.Records)
	}
	rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil || !rep.Complete() {
		t.Fatalf("audit: %v %+v", err, rep.Findings)
	}
}

// TestCompactTakesTiledBlocksBySummary: a compaction that merges a file
// spanning archived history places it on the ledger from the summaries of
// the archive's blocks, whose ranges tile their spans, without reading
// them: with the archive's segment files deleted (their indexes stay), a
// fresh reader still merges the first compaction's file with new small
// files. Before, every scheduled compaction of a long-lived table read
// and decoded every block its tiers spanned (the soak: a fifth of the
// sink's CPU at 70,000 commits).
func TestCompactTakesTiledBlocksBySummary(t *testing.T) {
	_, fresh, _ := compactedHistoryWithoutSegments(t, "lake.compact_tiled", 10)
	rowsBefore := snapshotRows(t, fresh, 0)
	res, err := fresh.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: floetest.QuietLogger()})
	if err != nil {
		t.Fatalf("compaction with the archive's segment files gone: %v", err)
	}
	if res.SnapshotID == 0 || res.Rows != 4000 || res.Replaced != 21 || res.Unplaced != 0 {
		t.Fatalf("compaction: %+v, want the first compaction's file and the 20 new ones merged", res)
	}
	if got := snapshotRows(t, fresh, 0); !slices.Equal(got, rowsBefore) {
		t.Errorf("rows changed by compaction: %d rows, want %d", len(got), len(rowsBefore))
	}
}
