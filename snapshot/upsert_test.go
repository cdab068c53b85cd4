package snapshot_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestUpsertTruncate commits flushes to an upsert table keyed by the
// Kafka key, one of them with a truncate (Flush.Truncated: a change event
// of a truncate, for --on-truncate delete-all): the truncate removes every
// row committed before it and the flush's rows of its partition below it,
// keeps the flush's later rows and other partitions' rows, and upserts go
// on after it with equality deletes. Rows are read with iceberg-go's scan.
func TestUpsertTruncate(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.upserts", snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	tp0 := mapping.TopicPartition{Topic: "t", Partition: 0}
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 2}, 1: {Low: 0, High: 1}},
		testRec{0, 0, "k1", "a", 0}, testRec{0, 1, "k2", "b", 0}, testRec{1, 0, "k3", "c", 0})
	if got := joinLines(snapshotRows(t, tbl, 0)); got != "0/000 k1=a\n0/001 k2=b\n1/000 k3=c" {
		t.Fatalf("first commit:\n%s", got)
	}

	// Offset 3 of partition 0 truncates: k1=d (offset 2) goes with the
	// rows before; k4 (offset 4) and partition 1's k5 stay.
	f := flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 2, High: 5}, 1: {Low: 1, High: 2}},
		testRec{0, 2, "k1", "d", 0}, testRec{0, 4, "k4", "e", 0}, testRec{1, 1, "k5", "f", 0})
	f.Truncated = map[mapping.TopicPartition]int64{tp0: 3}
	for i, r := range f.Ranges {
		if r.TopicPartition == tp0 {
			f.Ranges[i].Deletes = 1
		}
	}
	res := commitFlush(t, tbl, f)
	if got := joinLines(snapshotRows(t, tbl, 0)); got != "0/004 k4=e\n1/001 k5=f" {
		t.Fatalf("after the truncate:\n%s", got)
	}
	if res.Rows != 2 {
		t.Fatalf("%d rows, want 2", res.Rows)
	}

	// A tombstone of k4 and a new k1 after it: equality deletes again.
	f = flushOf(t, tbl, map[int32]mapping.Interval{0: {Low: 5, High: 7}},
		testRec{0, 5, "k4", "-", 0}, testRec{0, 6, "k1", "g", 0})
	f.Deletes = map[mapping.TopicPartition][]int64{tp0: {5}}
	f.Ranges[0].Records, f.Ranges[0].Deletes = 1, 1
	commitFlush(t, tbl, f)
	if got := joinLines(snapshotRows(t, tbl, 0)); got != "0/006 k1=g\n1/001 k5=f" {
		t.Fatalf("after the tombstone:\n%s", got)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	c := mapping.Cover(l.Ranges(tp0))
	if c.Records != 5 || c.Deletes != 2 || c.Next != 7 {
		t.Fatalf("partition 0: %+v", c)
	}
}

// TestUpsertCompactionOutlivesItsBase: an upsert table's compaction whose
// snapshot planned on is expired before it commits (a sink's in-sink
// expiry keeps a hundred snapshots; a long compaction beside a busy sink
// outlives it) commits: the expired snapshot is still an ancestor of the
// head through the archive, and no live position delete names a file it
// rewrites. It gave up at every run (found by review). After a rollback
// past that snapshot its plan is given up (the rewrite applied deletes
// the rollback undid), and the rows are the rolled-back table's.
func TestUpsertCompactionOutlivesItsBase(t *testing.T) {
	for _, rollback := range []bool{false, true} {
		t.Run(fmt.Sprintf("rollback=%v", rollback), func(t *testing.T) { upsertCompactionBeside(t, rollback) })
	}
}

func upsertCompactionBeside(t *testing.T, rollback bool) {
	cat := tempCatalog(t)
	sink := openTestTable(t, cat, "lake.upbase", snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	commitRecs(t, sink, map[int32]mapping.Interval{0: {Low: 0, High: 3}},
		testRec{0, 0, "k1", "a", 0}, testRec{0, 1, "k2", "b", 0}, testRec{0, 2, "k3", "c", 0})
	commitRecs(t, sink, map[int32]mapping.Interval{0: {Low: 3, High: 5}},
		testRec{0, 3, "k1", "d", 0}, testRec{0, 4, "k2", "e", 0})
	second := sink.Head().SnapshotID
	commitRecs(t, sink, map[int32]mapping.Interval{0: {Low: 5, High: 6}},
		testRec{0, 5, "k3", "f", 0})
	hc := &hookCatalog{Catalog: cat}
	comp := openTestTable(t, hc, "lake.upbase", snapshot.OpenOptions{})
	hc.beforeCommit = func() {
		if err := sink.Refresh(t.Context()); err != nil {
			t.Error(err)
			return
		}
		if rollback {
			setMain(t, sink, second)
			commitRecs(t, sink, map[int32]mapping.Interval{0: {Low: 5, High: 6}}, testRec{0, 5, "k1", "x", 0})
			return
		}
		commitRecs(t, sink, map[int32]mapping.Interval{0: {Low: 6, High: 7}}, testRec{0, 6, "k1", "g", 0})
		if _, err := sink.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
			t.Error(err)
		}
	}
	res, err := comp.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20})
	if rollback {
		// The plan read before the rollback is given up; the compaction
		// plans again on the rolled-back table (Compact's re-plans) and
		// commits that, or gives up when the table keeps moving.
		if err != nil && !strings.Contains(err.Error(), "no longer in the history") {
			t.Fatalf("compaction after a rollback past the snapshot it read: %+v, %v", res, err)
		}
		fresh := openTestTable(t, cat, "lake.upbase", snapshot.OpenOptions{})
		if got := joinLines(snapshotRows(t, fresh, 0)); got != "0/002 k3=c\n0/004 k2=e\n0/005 k1=x" {
			t.Fatalf("rows after a compaction beside a rollback (%+v, %v):\n%s", res, err, got)
		}
		return
	}
	if err != nil || res.SnapshotID == 0 {
		t.Fatalf("compaction beside an expiry of the snapshot it read: %+v, %v", res, err)
	}
	if !slices.Contains(res.LogAttrs(), any("live_rows")) {
		t.Errorf("the compaction of an upsert table logs %v, without the live rows", res.LogAttrs())
	}
	fresh := openTestTable(t, cat, "lake.upbase", snapshot.OpenOptions{})
	if got := joinLines(snapshotRows(t, fresh, 0)); got != "0/004 k2=e\n0/005 k3=f\n0/006 k1=g" {
		t.Fatalf("rows after the compaction:\n%s", got)
	}
}

// TestUpsertFilesKeepBoundsMetricsNone: floe's writers keep the position
// columns' bounds whatever the table's metrics settings, on every path:
// an upsert table's commits (Flush.Batches, upsertChanges) and its
// compaction (rewriteDeletes) wrote files without them with metrics off,
// which manifests then could not place (floe files, the audit's files
// level). From a review.
func TestUpsertFilesKeepBoundsMetricsNone(t *testing.T) {
	tbl := openTestTable(t, tempCatalog(t), "lake.upnometrics", snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	if err := tbl.SetProperties(t.Context(), map[string]string{"write.metadata.metrics.default": "none"}); err != nil {
		t.Fatal(err)
	}
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 2}}, testRec{0, 0, "k1", "a", 0}, testRec{0, 1, "k2", "b", 0})
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 2, High: 3}}, testRec{0, 2, "k1", "c", 0})
	check := func(when string) {
		files, err := tbl.Files(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !f.HasBounds {
				t.Errorf("%s: data file %s has no position bounds with write.metadata.metrics.default=none", when, f.Path)
			}
		}
	}
	check("after the commits")
	if _, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
}

// TestUpsertGroupRefitRecordsNewFiles: an upsert flush whose small
// partitions share a file group meets, at its retry, a partition spec
// another writer set meanwhile. Its files are written again for the new
// spec, under other names, and the commit's ledger names those: the
// group's files are the table's, no file of the first attempt is left,
// and the audit's file level is clean. (Read again instead, such a flush
// was read again at every schema change: from a review.)
func TestUpsertGroupRefitRecordsNewFiles(t *testing.T) {
	cat := tempCatalog(t)
	const name = "lake.upsert_refit"
	openTestTable(t, cat, name, snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	hc := &hookCatalog{Catalog: cat, beforeCommit: func() {
		other := openTestTable(t, cat, name, snapshot.OpenOptions{PartitionBy: partitionBy(t, "identity(kafka_key)")})
		commitRecs(t, other, map[int32]mapping.Interval{9: {Low: 0, High: 1}}, testRec{9, 0, "k9", "z", 0})
	}}
	tbl := openTestTable(t, hc, name, snapshot.OpenOptions{})
	bounds := map[int32]mapping.Interval{}
	var recs []testRec
	for p := range int32(6) {
		bounds[p] = mapping.Interval{Low: 0, High: 1}
		recs = append(recs, testRec{p, 0, fmt.Sprintf("k%d", p), "v", 0})
	}
	res := commitRecs(t, tbl, bounds, recs...)
	if res.Attempts < 2 {
		t.Fatalf("committed at attempt %d: the other writer's spec did not meet the retry", res.Attempts)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	last := l.Commits[len(l.Commits)-1]
	if last.SnapshotID != res.Commit.SnapshotID || len(last.FileGroups) != 1 || len(last.FileGroups[0].Spans) != 6 {
		t.Fatalf("the commit's groups %+v, want one of the 6 partitions", last.FileGroups)
	}
	if got := snapshotRows(t, tbl, 0); len(got) != 7 {
		t.Fatalf("rows %v, want the 6 keys and the other writer's", got)
	}
	rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthFiles})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("audit finding %s: %s", f.Kind, f.Detail)
	}
	named := map[string]bool{}
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		named[localPath(t, f.Path)] = true
	}
	deletes, err := tbl.DeleteFiles(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deletes {
		named[localPath(t, d.Path)] = true
	}
	for _, p := range last.FileGroups[0].Files {
		if !named[localPath(t, p)] {
			t.Errorf("the ledger's group names %s, which is not a file of the table", p)
		}
	}
	if err := filepath.WalkDir(strings.TrimPrefix(tbl.DataLocation(), "file://"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !named[p] {
			t.Errorf("data file %s is named by no snapshot: the first attempt's files were left behind", p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// localPath is the file system path of a file:// location.
func localPath(t *testing.T, location string) string {
	t.Helper()
	u, err := url.Parse(location)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}
