package snapshot_test

import (
	"fmt"
	"slices"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// s65UpsertParts makes an upsert table of 6 commits of k1..k4 and a
// tombstone of k4 (partition 0 of topic t), whose compaction with
// CommitBytes 2*size is made of 3 parts of 2 files. It returns the sink's
// table, a commit function and the size.
func s65UpsertParts(t *testing.T, name string) (sink *snapshot.Table, upsert func(...testRec), size int64, cat icecat.Catalog) {
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

// TestReviewS65UpsertCompactPartsRollbackToBase: an upsert table's
// compaction in parts whose first part committed, then main was rolled
// back to the snapshot the compaction planned on (an operator undoing
// the compaction snapshot they saw, with an Iceberg engine's
// rollback_to_snapshot) before the second part committed. The second
// part's retry reloads and checks only that the planned-on snapshot is
// still in main's history, which it is (it is main's head), and the last
// part drops every delete file the whole plan made obsolete: those of the
// first part's files too, which the rollback made live again. The old
// values of every key (and the tombstoned k4) come back.
func TestReviewS65UpsertCompactPartsRollbackToBase(t *testing.T) {
	const name = "lake.s65_rollback"
	sink, _, size, cat := s65UpsertParts(t, name)
	want := []string{"0/020 k1=v5", "0/021 k2=v5", "0/022 k3=v5"}
	if got := snapshotRows(t, sink, 0); !slices.Equal(got, want) {
		t.Fatalf("rows before the compaction:\n%s", joinLines(got))
	}
	before := sink.Head().SnapshotID
	hc := &hookCatalog{Catalog: cat}
	hc.beforeCommit = func() { // before part 1
		hc.beforeCommit = func() { // before part 2: part 1 landed
			if err := sink.Refresh(t.Context()); err != nil {
				t.Error(err)
				return
			}
			setMain(t, sink, before)
		}
	}
	comp := openTestTable(t, hc, name, snapshot.OpenOptions{})
	res, err := comp.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, CommitBytes: 2 * size})
	t.Logf("compaction: %+v, %v", res, err)
	fresh := openTestTable(t, cat, name, snapshot.OpenOptions{})
	if got := snapshotRows(t, fresh, 0); !slices.Equal(got, want) {
		t.Errorf("rows after a compaction whose first part was rolled back:\n%s\nwant\n%s", joinLines(got), joinLines(want))
	}
	rep, err := audit.Run(t.Context(), fresh, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("audit finding %s: %s", f.Kind, f.Detail)
	}
}
