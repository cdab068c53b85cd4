package audit_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// groupedTable sinks 6 partitions of 2,000 records each in one flush into
// a table whose files roll at every batch: the 6 small partitions share a
// lane, whose rows (12,000, more than a stream batch) land in a file group
// of 2 files. It returns the table and the commit's group.
func groupedTable(t *testing.T, e *env, name string) (*snapshot.Table, mapping.Commit) {
	t.Helper()
	e.Topic(name, 6, nil)
	tbl := e.Table("lake." + name)
	if err := tbl.SetProperties(e.Ctx, map[string]string{table.WriteTargetFileSizeBytesKey: "1"}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(6) {
		e.Produce(records(name, p, 2000, "g"))
	}
	e.sink(tbl, connector.Config{Topic: name, FlushRecords: 100_000})
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range l.Commits {
		if len(c.FileGroups) > 0 {
			if len(c.FileGroups) != 1 || len(c.FileGroups[0].Files) < 2 {
				t.Fatalf("commit %d has groups %+v, want one group of several files", c.SnapshotID, c.FileGroups)
			}
			return tbl, c
		}
	}
	t.Fatalf("no commit of %s has a file group", name)
	return nil, mapping.Commit{}
}

// TestCleanGroupedTable: a table whose rows are in a file group of several
// files audits complete at every level, and where finds rows in it.
func TestCleanGroupedTable(t *testing.T) {
	e := newEnv(t)
	tbl, c := groupedTable(t, e, "gclean")
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth, contentDepth(e)} {
		expectFindings(t, e.audit(tbl, opts))
	}
	res, err := lookup.Where(e.Ctx, tbl, e.Dial(), mapping.TopicPartition{Topic: "gclean", Partition: 4}, 1999)
	if err != nil || res.Status != lookup.StatusRow || !slices.Contains(c.FileGroups[0].Files, res.File) {
		t.Fatalf("where: %+v %v, want a row in a file of the group %v", res, err, c.FileGroups[0].Files)
	}
}

// TestFaultGroupFileRemoved: another writer removes one file of a file
// group. The files level names the removed file (missing-file) and the
// group's ranges, whose live files now hold fewer rows than their records
// (count-mismatch); before file groups the group's files were stray files
// of several partitions and the removal went unnamed.
func TestFaultGroupFileRemoved(t *testing.T) {
	e := newEnv(t)
	tbl, c := groupedTable(t, e, "gmissing")
	gone := c.FileGroups[0].Files[1]
	txn := tbl.Iceberg().NewTransaction()
	if err := txn.ReplaceDataFiles(e.Ctx, []string{gone}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	expectFindings(t, e.audit(tbl, ledgerOnly))
	rep := e.audit(tbl, filesDepth)
	var missing, mismatch int
	for _, f := range rep.Findings {
		switch f.Kind {
		case audit.KindMissingFile:
			missing++
			if f.File != gone || !strings.Contains(f.Detail, "gmissing/0 [0, 2000)") {
				t.Errorf("missing-file finding %+v, want file %s and the group's ranges named", f, gone)
			}
		case audit.KindCountMismatch:
			mismatch++
			if !strings.Contains(f.Detail, "6 ranges gmissing/0 [0, 2000), gmissing/1 [0, 2000)") || !strings.Contains(f.Detail, "12000 records") {
				t.Errorf("count-mismatch finding %q, want the group's ranges and records named", f.Detail)
			}
		default:
			t.Errorf("unexpected finding %+v", f)
		}
	}
	if missing != 1 || mismatch != 1 {
		t.Fatalf("findings %q: want one missing file and one count mismatch", findings(rep))
	}
}

// TestFaultGroupForeignFile: a file another writer added to a grouped
// table is foreign, and the group's own files stay clean.
func TestFaultGroupForeignFile(t *testing.T) {
	e := newEnv(t)
	tbl, _ := groupedTable(t, e, "gforeign")
	tp := mapping.TopicPartition{Topic: "gforeign", Partition: 2}
	path := writeFile(t, tbl, batch(t, tbl, tp, span(5000, 5010)...))
	txn := tbl.Iceberg().NewTransaction()
	if err := txn.AddFiles(e.Ctx, []string{path}, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	expectFindings(t, e.audit(tbl, filesDepth), "files foreign-file gforeign/2 [5000, 5010)")
	expectFindings(t, e.audit(tbl, rowsDepth), "files foreign-file gforeign/2 [5000, 5010)", "rows outside-ledger gforeign/2 [5000, 5010)")
}

// TestFaultGroupSpanOutside: a commit's file group says it holds offsets of
// a partition no range of the commit covers (a property edited by hand):
// the files level reports the span as a stray file, naming it.
func TestFaultGroupSpanOutside(t *testing.T) {
	e := newEnv(t)
	tbl, _ := groupedTable(t, e, "gspan")
	tp0, tp1 := mapping.TopicPartition{Topic: "gspan", Partition: 0}, mapping.TopicPartition{Topic: "gspan", Partition: 1}
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp0, Interval: mapping.Interval{Low: 2000, High: 2010}, Records: 10}},
		batch(t, tbl, tp0, span(2000, 2010)...),
		mapping.Span{TopicPartition: tp0, Interval: mapping.Interval{Low: 2000, High: 2010}},
		mapping.Span{TopicPartition: tp1, Interval: mapping.Interval{Low: 2000, High: 2010}})
	rep := e.audit(tbl, filesDepth)
	expectFindings(t, rep, "files stray-file gspan/1 [2000, 2010)")
	if d := rep.Findings[0].Detail; !strings.Contains(d, "no range of that snapshot with rows covers") {
		t.Fatalf("detail %q", d)
	}
}

// groupOfTwo is groupedTable with one more commit forced on it: a file
// group whose spans and ranges are partitions 0 and 1 at [2000, 2010),
// the ranges of 10 and records1 records, and whose one file holds
// partition 0's 10 rows there and partition 1's at [low1, low1+10).
func groupOfTwo(t *testing.T, e *env, name string, low1, records1 int64) *snapshot.Table {
	t.Helper()
	tbl, _ := groupedTable(t, e, name)
	tp0, tp1 := mapping.TopicPartition{Topic: name, Partition: 0}, mapping.TopicPartition{Topic: name, Partition: 1}
	rows := batch(t, tbl, tp0, span(2000, 2010)...)
	defer rows.Release()
	more := batch(t, tbl, tp1, span(low1, low1+10)...)
	defer more.Release()
	both, err := mapping.Conform(memory.NewGoAllocator(), tbl.ArrowSchema(), []arrow.RecordBatch{rows, more})
	if err != nil {
		t.Fatal(err)
	}
	at := mapping.Interval{Low: 2000, High: 2010}
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp0, Interval: at, Records: 10}, {TopicPartition: tp1, Interval: at, Records: records1}},
		both, mapping.Span{TopicPartition: tp0, Interval: at}, mapping.Span{TopicPartition: tp1, Interval: at})
	return tbl
}

// TestFaultGroupFileBoundsOutsideSpans: a group's file whose rows match
// its ranges' count but whose bounds reach offsets no span of the group
// holds (partition 1's rows at [5000, 5010), the spans and ranges at
// [2000, 2010)) is a stray file at the files level, which used to count a
// group's files by rows only and found the table complete (found by
// review). The rows level finds the rows outside the ledger.
func TestFaultGroupFileBoundsOutsideSpans(t *testing.T) {
	e := newEnv(t)
	tbl := groupOfTwo(t, e, "gbounds", 5000, 10)
	rep := e.audit(tbl, filesDepth)
	expectFindings(t, rep, "files stray-file")
	if d := rep.Findings[0].Detail; !strings.Contains(d, "at offsets [2000, 5010), beyond its group's 2 spans (partitions 0 to 1, offsets [2000, 2010))") {
		t.Fatalf("detail %q", d)
	}
	expectFindings(t, e.audit(tbl, rowsDepth), "files stray-file", "rows count-mismatch gbounds/1 [2000, 2010)", "rows outside-ledger gbounds/1 [5000, 5010)")
}

// TestFaultGroupCountMismatch: a group whose files hold more rows than its
// ranges' records (a commit of 20 rows over two partitions whose ledger
// says 19) is one count mismatch naming both ranges.
func TestFaultGroupCountMismatch(t *testing.T) {
	e := newEnv(t)
	tbl := groupOfTwo(t, e, "gcount", 2000, 9)
	rep := e.audit(tbl, filesDepth)
	expectFindings(t, rep, "files count-mismatch gcount/0 [2000, 2010)")
	if d := rep.Findings[0].Detail; !strings.Contains(d, "2 ranges gcount/0 [2000, 2010), gcount/1 [2000, 2010)") || !strings.Contains(d, "19 records") || !strings.Contains(d, "hold 20 rows") {
		t.Fatalf("detail %q", d)
	}
}

// TestCleanMixedPureAndGrouped: a table written by commits of one
// partition per file (a flush of few partitions, as every commit before
// file groups) and then by commits with file groups audits complete at
// every level, and where answers offsets of both.
func TestCleanMixedPureAndGrouped(t *testing.T) {
	e := newEnv(t)
	const topic = "gmixed"
	e.Topic(topic, 8, nil)
	tbl := e.Table("lake." + topic)
	for p := range int32(3) {
		e.Produce(records(topic, p, 30, "pure"))
	}
	e.sink(tbl, connector.Config{Topic: topic})
	for p := range int32(8) {
		e.Produce(records(topic, p, 30, "grouped"))
	}
	e.sink(tbl, connector.Config{Topic: topic})
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	var pure, grouped int
	for _, c := range l.Commits {
		switch {
		case len(c.FileGroups) > 0:
			grouped++
		case slices.ContainsFunc(c.Ranges, func(r mapping.Range) bool { return r.Records > 0 }):
			pure++
		}
	}
	if pure == 0 || grouped == 0 {
		t.Fatalf("%d pure and %d grouped commits, want both", pure, grouped)
	}
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth, contentDepth(e)} {
		expectFindings(t, e.audit(tbl, opts))
	}
	for _, at := range []struct {
		p int32
		o int64
	}{{0, 5}, {0, 45}, {2, 29}, {7, 10}} {
		tp := mapping.TopicPartition{Topic: topic, Partition: at.p}
		res, err := lookup.Where(e.Ctx, tbl, e.Dial(), tp, at.o)
		if err != nil || res.Status != lookup.StatusRow {
			t.Fatalf("where %s@%d: %+v %v", tp, at.o, res, err)
		}
	}
}

// TestGroupFileRemovedCountsForItsPartitions: another writer removes one
// file of a sink's file group. Which partitions lost rows is not known
// from the counts (the group's files hold its ranges' rows together), so
// the findings count for every partition of the group: each partition
// whose rows went with the file reads "findings", not "complete", in the
// report's per-partition status, and the JSON names them. The findings
// were pinned on the group's first partition alone. From a review.
func TestGroupFileRemovedCountsForItsPartitions(t *testing.T) {
	e := newEnv(t)
	tbl, c := groupedTable(t, e, "gpart")
	gone := c.FileGroups[0].Files[len(c.FileGroups[0].Files)-1]
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	hit := map[int32]bool{}
	for _, f := range files {
		if f.Path == gone {
			for p := f.PartitionMin; p <= f.PartitionMax; p++ {
				hit[p] = true
			}
		}
	}
	if hit[0] || len(hit) == 0 {
		t.Fatalf("the removed file holds partitions %v; the test wants it not to hold partition 0", hit)
	}
	txn := tbl.Iceberg().NewTransaction()
	if err := txn.ReplaceDataFiles(e.Ctx, []string{gone}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	rep := e.audit(tbl, filesDepth)
	if rep.Complete() {
		t.Fatal("audit complete with a group file removed")
	}
	for _, p := range rep.Partitions {
		if hit[p.Partition] && p.Findings == 0 {
			t.Errorf("partition %s lost rows with file %s, yet the files level reports it with no finding (status complete)", p.TopicPartition, gone)
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"other_partitions"`) {
		t.Errorf("the JSON report names no other partition of the group's findings:\n%s", js.String())
	}
}
