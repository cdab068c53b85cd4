package snapshot_test

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestCompactInParts: a compaction that replaces more than
// CompactOptions.CommitBytes commits in parts, each a compaction snapshot
// of its own groups, so that no part's files wait for the rewrite of the
// whole backlog (a compaction does not commit files older than half an
// hour: one commit of a large table's backlog never committed). The rows
// and the ledger are unchanged, and the result adds up the parts.
func TestCompactInParts(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.parts", snapshot.OpenOptions{Create: true})
	smallFiles(t, tbl, 0, 12, 5) // 24 files of [0, 60) in two partitions
	var size int64
	for _, f := range liveDataFiles(t, tbl) {
		size = max(size, f.SizeBytes)
	}
	rows, ledger, before := snapshotRows(t, tbl, 0), must(tbl.Ledger()), tbl.Head().SnapshotID
	// Two small files fit a target, three do not; a part holds one group.
	res, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 2*size + size/2, CommitBytes: 3 * size})
	if err != nil {
		t.Fatal(err)
	}
	if res.Groups < 4 || res.Commits != res.Groups || res.Replaced != 24 {
		t.Fatalf("compaction: %+v, want a commit per group of at least 4", res)
	}
	var commits, added int
	var replacedRows int64
	for _, s := range table.AncestorsOf(tbl.Head().SnapshotID, tbl.Iceberg().Metadata().SnapshotByID) {
		if s.SnapshotID == before {
			break
		}
		if !tbl.IsCompaction(s.SnapshotID) || s.Summary.Operation != table.OpReplace {
			t.Fatalf("snapshot %d since the compaction began is not one: %v", s.SnapshotID, s.Summary)
		}
		commits++
		n, _ := strconv.Atoi(s.Summary.Properties[snapshot.KeyCompactAdded])
		r, _ := strconv.ParseInt(s.Summary.Properties[snapshot.KeyCompactRows], 10, 64)
		added, replacedRows = added+n, replacedRows+r
	}
	if commits != res.Commits || added != res.Added || replacedRows != res.Rows || res.SnapshotID != tbl.Head().SnapshotID {
		t.Errorf("%d compaction snapshots adding %d files of %d rows, head %d; result %+v", commits, added, replacedRows, tbl.Head().SnapshotID, res)
	}
	if live := len(liveDataFiles(t, tbl)); live != res.FilesAfter || live != 24-res.Replaced+res.Added {
		t.Errorf("%d live files, result %+v", live, res)
	}
	if got := snapshotRows(t, tbl, 0); !slices.Equal(got, rows) {
		t.Errorf("rows changed by compaction:\n%s\nwant\n%s", joinLines(got), joinLines(rows))
	}
	if got := must(tbl.Ledger()); !reflect.DeepEqual(got, ledger) {
		t.Errorf("ledger changed by compaction:\n%v\nwant\n%v", got, ledger)
	}
}

// TestUpsertCompactInParts: an upsert table's compaction (which applies
// the table's deletes) of more than CompactOptions.CommitBytes commits in
// parts too, cutting even its one Iceberg partition between files. Every
// part's files keep the data sequence number of the snapshot planned on,
// so that a sink's update and tombstone committed between two parts still
// apply to the files of every part; the delete files the rewrite made
// obsolete go with the last part. Between the parts and after them the
// table is the latest value of each key, and the audit finds nothing.
func TestUpsertCompactInParts(t *testing.T) {
	sink, upsert, size, cat := upsertParts(t, "lake.upsert_parts")
	want := []string{"0/020 k1=v5", "0/021 k2=v5", "0/022 k3=v5"}
	if got := snapshotRows(t, sink, 0); !slices.Equal(got, want) {
		t.Fatalf("rows before the compaction:\n%s", joinLines(got))
	}
	files := must(sink.Files(t.Context(), 0))
	before := sink.Head().SnapshotID
	baseDeletes := map[string]bool{}
	for _, d := range must(sink.DeleteFiles(t.Context(), 0)) {
		baseDeletes[d.Path] = true
	}

	// Before the second part's first attempt, the sink updates k1 and
	// deletes k2, keys of rows in the files of every part.
	hc := &hookCatalog{Catalog: cat}
	hc.beforeCommit = func() {
		hc.beforeCommit = func() { // a hook runs once
			if err := sink.Refresh(t.Context()); err != nil {
				t.Error(err)
				return
			}
			if got := snapshotRows(t, sink, 0); !slices.Equal(got, want) {
				t.Errorf("rows after the first part:\n%s", joinLines(got))
			}
			upsert(testRec{key: "k1", value: "z"}, testRec{key: "k2", value: "-"})
		}
	}
	comp := openTestTable(t, hc, "lake.upsert_parts", snapshot.OpenOptions{})
	res, err := comp.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, CommitBytes: 2 * size})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commits != 3 || res.Replaced != len(files) || res.LiveRows != 3 || res.DroppedDeletes == 0 {
		t.Fatalf("compaction of %d files: %+v, want 3 parts of 2 files, 3 live rows, dropped deletes", len(files), res)
	}
	if err := sink.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := snapshotRows(t, sink, 0), []string{"0/022 k3=v5", "0/025 k1=z"}; !slices.Equal(got, want) {
		t.Errorf("rows after the compaction:\n%s\nwant\n%s", joinLines(got), joinLines(want))
	}
	var compactions int
	var live int64
	for _, s := range table.AncestorsOf(sink.Head().SnapshotID, sink.Iceberg().Metadata().SnapshotByID) {
		if s.SnapshotID == before {
			break
		}
		if sink.IsCompaction(s.SnapshotID) {
			compactions++
			n, _ := strconv.ParseInt(s.Summary.Properties[snapshot.KeyCompactLiveRows], 10, 64)
			live += n
		}
	}
	if compactions != 3 || live != res.LiveRows {
		t.Errorf("%d compaction snapshots, their live rows %d; result %+v", compactions, live, res)
	}
	// What is left of the deletes is the sink's, which the rewrite did
	// not apply.
	left := must(sink.DeleteFiles(t.Context(), 0))
	for _, d := range left {
		if baseDeletes[d.Path] {
			t.Errorf("delete file %s of snapshot %d, applied by the compaction, left after it", d.Path, d.AddedBy)
		}
	}
	if len(left) == 0 {
		t.Error("no delete file left: the sink's, committed between the parts, is gone")
	}
	rep, err := audit.Run(t.Context(), sink, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("audit finding %s: %s", f.Kind, f.Detail)
	}
}

// upsertParts makes upsert table name of 6 commits of k1..k4 and a
// tombstone of k4 (partition 0 of topic t), whose compaction with
// CommitBytes 2*size is made of 3 parts of 2 files. It returns the sink's
// table, a function that commits records as the next offsets of partition
// 0 (a value "-" a tombstone), the size and the catalog.
func upsertParts(t *testing.T, name string) (sink *snapshot.Table, upsert func(...testRec), size int64, cat icecat.Catalog) {
	t.Helper()
	cat = tempCatalog(t)
	sink = openTestTable(t, cat, name, snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	next := int64(0)
	upsert = func(recs ...testRec) {
		t.Helper()
		for i := range recs {
			recs[i].offset = next + int64(i)
		}
		f := flushOf(t, sink, map[int32]mapping.Interval{0: {Low: next, High: next + int64(len(recs))}}, recs...)
		f.Deletes = map[mapping.TopicPartition][]int64{}
		for _, r := range recs {
			if r.value == "-" {
				f.Deletes[tp] = append(f.Deletes[tp], r.offset)
				f.Ranges[0].Records--
				f.Ranges[0].Deletes++
			}
		}
		next += int64(len(recs))
		commitFlush(t, sink, f)
	}
	for i := range 6 {
		var recs []testRec
		for k := range 4 {
			recs = append(recs, testRec{key: fmt.Sprintf("k%d", k+1), value: fmt.Sprintf("v%d", i)})
		}
		upsert(recs...)
	}
	upsert(testRec{key: "k4", value: "-"})
	for _, f := range must(sink.Files(t.Context(), 0)) {
		size = max(size, f.SizeBytes)
	}
	return sink, upsert, size, cat
}
