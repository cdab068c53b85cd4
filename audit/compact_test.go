package audit_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	floecatalog "github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// compact compacts tbl (small targets: the test files are small) and
// fails unless it rewrote something.
func compact(t *testing.T, tbl *snapshot.Table) snapshot.CompactResult {
	t.Helper()
	res, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if res.SnapshotID == 0 || res.FilesAfter >= res.FilesBefore {
		t.Fatalf("compaction rewrote nothing: %+v", res)
	}
	return res
}

// TestCleanAfterCompaction: a table sunk in many small flushes from a log
// with transactions (markers, aborted records) is complete at every level
// after compaction, content included, with fewer files and the same rows;
// and still after the compaction snapshot expired (its files recognised
// from the ledger archive).
func TestCleanAfterCompaction(t *testing.T) {
	e := newEnv(t)
	const topic = "compacted"
	rows := e.MixedLog(topic, floetest.MixedLog{Partitions: 3, Records: 120, Committed: 10, Aborted: 7, Trailing: 25})
	tbl := e.Table("lake.compacted")
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 15})
	before := sortedRows(t, tbl)
	rep := auditEveryLevel(t, e, tbl)
	filesBefore := rep.Files

	res := compact(t, tbl)
	rep = auditEveryLevel(t, e, tbl)
	// One file of the 3 partitions, recorded as a file group; each
	// partition counts it.
	if rep.Files != res.FilesAfter || rep.Files != 1 || filesBefore != res.FilesBefore {
		t.Fatalf("files: %d before (report %d), %d after (report %d), want 1 after", res.FilesBefore, filesBefore, res.FilesAfter, rep.Files)
	}
	if c := contentTotals(rep); c.Verified != int64(rows) {
		t.Fatalf("content verified %d rows, want %d", c.Verified, rows)
	}
	files := 0
	for _, p := range rep.Partitions {
		files += p.Files
	}
	if files != 3 {
		t.Fatalf("partitions' files %d, want 3", files)
	}
	if after := sortedRows(t, tbl); !reflect.DeepEqual(after, before) {
		t.Fatal("rows changed by compaction")
	}

	// More commits, then expire everything but the head: the compaction
	// snapshot that added most files is only in the ledger archive now.
	e.Produce(records(topic, 1, 30, "later"))
	e.sink(tbl, connector.Config{Topic: topic})
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if tbl.Iceberg().Metadata().SnapshotByID(res.SnapshotID) != nil || !tbl.IsCompaction(res.SnapshotID) {
		t.Fatal("the compaction snapshot should be expired and archived")
	}
	auditEveryLevel(t, e, tbl)
}

// TestCleanCompactedDeadLetters: a typed table and its dead-letter table,
// both compacted, are complete at every level, content included.
func TestCleanCompactedDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	var values []string
	for i := range 40 {
		switch i % 5 {
		case 1:
			values = append(values, "")
		case 3:
			values = append(values, `{"id":"x"}`)
		default:
			values = append(values, fmt.Sprintf(`{"id":%d}`, i))
		}
	}
	jsonLog(e, "orders", values...)
	e.sink(tbl, connector.Config{Topic: "orders", DeadLetters: dlq, FlushRecords: 5})
	compact(t, tbl)
	compact(t, dlq)
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep)
	if p := rep.Partitions[0]; p.Records != 24 || p.DeadLettersRead != 16 || p.Content.DeadLetters != 16 || p.Content.Verified != 24 {
		t.Fatalf("partition report %+v, content %+v", p, p.Content)
	}
	if n := len(must(dlq.Files(e.Ctx, 0))); n != 1 {
		t.Fatalf("%d dead-letter files after compaction, want 1", n)
	}
	floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{{Topic: "orders", Partition: 0}: 40})
}

// sortedRows is floetest.Rows in partition and offset order.
func sortedRows(t *testing.T, tbl *snapshot.Table) []floetest.Row {
	rows := floetest.Rows(t, tbl)
	slices.SortFunc(rows, func(a, b floetest.Row) int { return cmp.Or(a.TP.Compare(b.TP), cmp.Compare(a.Offset, b.Offset)) })
	return rows
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// liveRows reads the rows of the table's head that filter selects.
func liveRows(t *testing.T, tbl *snapshot.Table, filter iceberg.BooleanExpression) []arrow.RecordBatch {
	t.Helper()
	_, it, err := tbl.Iceberg().Scan(table.WithRowFilter(filter)).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []arrow.RecordBatch
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// offsetsOf selects the rows of partition p at offsets [low, high) but
// those of skip.
func offsetsOf(p int32, low, high int64, skip ...int64) iceberg.BooleanExpression {
	e := iceberg.NewAnd(iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), p),
		iceberg.GreaterThanEqual(iceberg.Reference(mapping.ColOffset), low),
		iceberg.LessThan(iceberg.Reference(mapping.ColOffset), high))
	for _, o := range skip {
		e = iceberg.NewAnd(e, iceberg.NotEqualTo(iceberg.Reference(mapping.ColOffset), o))
	}
	return e
}

// rewrite commits, as a compaction would (Iceberg operation replace), one
// snapshot replacing the live files of partition p within offsets [low,
// high) with files of rows; marked says whether it carries floe's
// compaction marker.
func rewrite(t *testing.T, tbl *snapshot.Table, p int32, low, high int64, rows []arrow.RecordBatch, marked bool) {
	t.Helper()
	rewriteFiles(t, tbl, p, low, high, marked, rows)
}

// rewriteFiles is rewrite writing each of files apart (a compaction whose
// output rolled over into several files).
func rewriteFiles(t *testing.T, tbl *snapshot.Table, p int32, low, high int64, marked bool, files ...[]arrow.RecordBatch) {
	t.Helper()
	rewriteWhere(t, tbl, func(f snapshot.DataFile) bool {
		return f.PartitionMin == p && f.Offsets.Low >= low && f.Offsets.High <= high
	}, marked, files...)
}

// rewriteWhere is rewriteFiles replacing the live files of tbl (as last
// loaded) that replace accepts.
func rewriteWhere(t *testing.T, tbl *snapshot.Table, replace func(snapshot.DataFile) bool, marked bool, files ...[]arrow.RecordBatch) {
	t.Helper()
	var olds []iceberg.DataFile
	tasks, err := tbl.Iceberg().Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		for _, f := range must(tbl.Files(t.Context(), 0)) {
			if f.Path == task.File.FilePath() && replace(f) {
				olds = append(olds, task.File)
			}
		}
	}
	var news []iceberg.DataFile
	var n int64
	for _, rows := range files {
		all := func(yield func(arrow.RecordBatch, error) bool) {
			for _, b := range rows {
				if !yield(b, nil) {
					return
				}
			}
		}
		for df, err := range table.WriteRecords(t.Context(), tbl.Iceberg(), rows[0].Schema(), all) {
			if err != nil {
				t.Fatal(err)
			}
			news = append(news, df)
			n += df.Count()
		}
	}
	props := iceberg.Properties{"engine": "other"}
	if marked {
		props = iceberg.Properties{snapshot.KeyOperation: snapshot.OperationCompact, snapshot.KeyCompactRows: fmt.Sprint(n)}
	}
	txn := tbl.Iceberg().NewTransaction()
	rw := txn.NewRewrite(props)
	for _, df := range olds {
		rw.DeleteFile(df)
	}
	for _, df := range news {
		rw.AddDataFile(df)
	}
	if err := rw.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestFaultTamperedRewrite: a rewrite that carries floe's compaction
// marker but lost a row is found at the files level (the ranges its file
// spans, and the snapshot's own counts), the rows level and the content
// level; one that changed values only by the content level; a rewrite of
// another writer, even one that keeps every row, leaves foreign and
// missing files.
func TestFaultTamperedRewrite(t *testing.T) {
	t.Run("row lost", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "lossy")
		rewrite(t, tbl, 1, 0, 40, liveRows(t, tbl, offsetsOf(1, 0, 40, 25)), true)
		expectFindings(t, e.audit(tbl, ledgerOnly))
		files := []string{"files count-mismatch lossy/1 [0, 40)", "files count-mismatch"}
		rep := e.audit(tbl, filesDepth)
		expectFindings(t, rep, files...)
		for _, f := range rep.Findings {
			if !f.HasPartition && !strings.Contains(f.Detail, "a compaction never changes rows") {
				t.Errorf("finding %+v", f)
			}
		}
		rows := append(files, "rows count-mismatch lossy/1 [20, 40)")
		expectFindings(t, e.audit(tbl, rowsDepth), rows...)
		expectFindings(t, e.audit(tbl, contentDepth(e)), append(rows, "content missing-row lossy/1 [25, 26)")...)
	})
	t.Run("values changed", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "changed")
		tp := mapping.TopicPartition{Topic: "changed", Partition: 0}
		// batch makes keys and values of its own, not the log's.
		rewrite(t, tbl, 0, 0, 40, []arrow.RecordBatch{batch(t, tbl, tp, span(0, 40)...)}, true)
		expectFindings(t, e.audit(tbl, rowsDepth))
		expectFindings(t, e.audit(tbl, contentDepth(e)), "content content-mismatch changed/0 [0, 40)")
	})
	t.Run("spans a gap", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "gappy")
		tp := mapping.TopicPartition{Topic: "gappy", Partition: 2}
		// Offsets beyond the ledger's end: no chain of ranges holds them.
		rewrite(t, tbl, 2, 40, 60, []arrow.RecordBatch{batch(t, tbl, tp, span(40, 70)...)}, true)
		expectFindings(t, e.audit(tbl, filesDepth), "files stray-file gappy/2 [40, 70)", "files missing-file gappy/2 [40, 60)", "files count-mismatch")
	})
	t.Run("foreign", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "foreign")
		f0, f1 := fileOf(t, tbl, 0, 0), fileOf(t, tbl, 0, 20)
		rewrite(t, tbl, 0, 0, 40, liveRows(t, tbl, offsetsOf(0, 0, 40)), false)
		rep := e.audit(tbl, filesDepth)
		expectFindings(t, rep, "files foreign-file foreign/0 [0, 40)", "files missing-file foreign/0 [0, 20)", "files missing-file foreign/0 [20, 40)")
		for _, f := range rep.Findings {
			if f.Kind == audit.KindMissingFile && f.File != f0.Path && f.File != f1.Path {
				t.Errorf("finding %+v names another file", f)
			}
		}
	})
}

// TestCompactedFilesSplitARange: a compaction whose output rolled over
// into two files, the first holding offsets [0, 30) of a partition and the
// second [30, 60), where the ledger's ranges are [0, 20), [20, 40) and
// [40, 60): both files' chains hold range [20, 40), so the files level
// counts the two files' rows against the three ranges together. A lost
// row is a count mismatch naming the three ranges.
func TestCompactedFilesSplitARange(t *testing.T) {
	t.Run("complete", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "split")
		rewriteFiles(t, tbl, 0, 0, 60, true, liveRows(t, tbl, offsetsOf(0, 0, 30)), liveRows(t, tbl, offsetsOf(0, 30, 60)))
		if err := tbl.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(must(tbl.Files(t.Context(), 0))); n != 8 {
			t.Fatalf("%d live files, want 8 (2 compacted, 6 of the other partitions)", n)
		}
		auditEveryLevel(t, e, tbl)
	})
	t.Run("row lost", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "splitlossy")
		rewriteFiles(t, tbl, 0, 0, 60, true, liveRows(t, tbl, offsetsOf(0, 0, 30)), liveRows(t, tbl, offsetsOf(0, 30, 60, 35)))
		rep := e.audit(tbl, filesDepth)
		expectFindings(t, rep, "files count-mismatch splitlossy/0 [0, 60)", "files count-mismatch")
		for _, f := range rep.Findings {
			if f.HasPartition && !strings.Contains(f.Detail, "the 3 ranges from [0, 20)") {
				t.Errorf("finding %+v does not name the three ranges", f)
			}
		}
	})
}

// TestCompactionBesideALiveSink: compactions run again and again while a
// live sink commits small flushes: the sink is never fenced, the
// compactions retry over its commits, and every record ends in the table
// exactly once, complete at every level.
func TestCompactionBesideALiveSink(t *testing.T) {
	e := newEnv(t)
	const topic, parts = "live", 2
	e.Topic(topic, parts, nil)
	tbl := e.Table("lake.live")
	comp := e.Table("lake.live")

	var (
		mu     sync.Mutex
		fenced []error
	)
	sink, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, FlushRecords: 10, FlushInterval: 20 * time.Millisecond,
		Logger: quietLogger(), OnFenced: func(err error) { mu.Lock(); fenced = append(fenced, err); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := sink.Run(ctx)
		done <- err
	}()

	compactions, retried := 0, 0
	for round := range 12 {
		for p := range int32(parts) {
			e.Produce(records(topic, p, 25, fmt.Sprint("r", round)))
		}
		res, err := comp.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		if res.SnapshotID != 0 {
			compactions++
		}
		if res.Attempts > 1 {
			retried++
		}
	}
	want := e.HighWatermarks(topic)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := comp.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		l := must(comp.Ledger())
		next := l.Next()
		if next[mapping.TopicPartition{Topic: topic, Partition: 0}] == want[mapping.TopicPartition{Topic: topic, Partition: 0}] &&
			next[mapping.TopicPartition{Topic: topic, Partition: 1}] == want[mapping.TopicPartition{Topic: topic, Partition: 1}] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink did not catch up: ledger %v, log %v", next, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(fenced) > 0 {
		t.Fatalf("the sink was fenced: %v", fenced)
	}
	if compactions == 0 {
		t.Fatal("no compaction rewrote anything")
	}
	t.Logf("%d compactions, %d retried over a sink commit", compactions, retried)
	final := e.Table("lake.live")
	floetest.CheckExactlyOnce(t, final, want)
	auditEveryLevel(t, e, final)
}

// TestCleanCompactedTwoTopics: a table holding partition 0 of two topics
// at the same offsets: compaction places each small file on its topic's
// ranges (the topic column's bounds tell them apart where the offsets
// cannot) and merges them into one file whose group names both topics'
// spans, on which the audit places it.
func TestCleanCompactedTwoTopics(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.two")
	a, b := mapping.TopicPartition{Topic: "alpha", Partition: 0}, mapping.TopicPartition{Topic: "beta", Partition: 0}
	for lo := int64(0); lo < 30; lo += 10 {
		commit(t, tbl, a, lo, lo+10, span(lo, lo+10))
		commit(t, tbl, b, lo, lo+10, span(lo, lo+8))
	}
	res := compact(t, tbl)
	if res.Groups != 1 || res.FilesAfter != 1 || res.Unplaced != 0 {
		t.Fatalf("compaction: %+v", res)
	}
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth} {
		rep := e.audit(tbl, opts)
		expectFindings(t, rep)
		if opts.Depth >= audit.DepthFiles && (rep.Partitions[0].Files != 1 || rep.Partitions[1].Files != 1) {
			t.Fatalf("files per partition: %+v", rep.Partitions)
		}
	}
	expectFindings(t, e.audit(tbl, audit.Options{Depth: audit.DepthRows, Topic: "beta"}))
}

// TestCleanCompactedTopicsOfDifferentPartitions: a compaction merging
// topics of different partition counts (alpha/0, alpha/1, beta/0) into one
// file checks that file against the lowest and highest partition of the
// whole group, not those of its first and last span (sorted by topic: 0
// and 0), which refused every such compaction.
func TestCleanCompactedTopicsOfDifferentPartitions(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.two")
	for lo := int64(0); lo < 30; lo += 10 {
		for _, tp := range []mapping.TopicPartition{{Topic: "alpha", Partition: 0}, {Topic: "alpha", Partition: 1}, {Topic: "beta", Partition: 0}} {
			commit(t, tbl, tp, lo, lo+10, span(lo, lo+10))
		}
	}
	if res := compact(t, tbl); res.FilesAfter != 1 || res.Rows != 90 {
		t.Fatalf("compaction: %+v, want 9 files of 90 rows in 1", res)
	}
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth} {
		expectFindings(t, e.audit(tbl, opts))
	}
}

// TestCleanCompactedTypedPartitioned: a typed table partitioned by key,
// whose schema grew a column halfway and whose bad records went to its
// dead-letter table, compacted with its dead-letter table: one file per
// Iceberg partition (dead letters: one file of both Kafka partitions),
// complete at every level, content decoded and compared record by record.
func TestCleanCompactedTypedPartitioned(t *testing.T) {
	e := newEnv(t)
	e.Topic("typed", 2, nil)
	cat, err := floecatalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	pb, err := mapping.ParsePartitionBy("identity(kafka_key)")
	if err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"lake", "typed"}
	tbl, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Value: mapping.ValueJSON}, PartitionBy: &pb})
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := snapshot.OpenDeadLetters(e.Ctx, cat, snapshot.DeadLetterName(ident), tbl.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 80 {
		v := fmt.Sprintf(`{"id":%d,"kind":"%c"}`, i, 'a'+i%2)
		switch {
		case i%9 == 4:
			v = "{not json"
		case i >= 40:
			v = fmt.Sprintf(`{"id":%d,"kind":"%c","note":"n%d"}`, i, 'a'+i%2, i)
		}
		recs = append(recs, &kgo.Record{Topic: "typed", Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%d", i/2%2), Value: []byte(v)})
	}
	e.Produce(recs)
	e.sink(tbl, connector.Config{Topic: "typed", DeadLetters: dlq, FlushRecords: 6})
	before := sortedRows(t, tbl)
	results, err := tbl.CompactAll(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].FilesAfter != 2 || results[1].FilesAfter != 1 {
		// One file per key (Iceberg partition), across the Kafka
		// partitions; the dead letters are unpartitioned: one file.
		t.Fatalf("compactions: %+v", results)
	}
	if after := sortedRows(t, tbl); !reflect.DeepEqual(after, before) {
		t.Fatal("rows changed by compaction")
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep)
	var verified, dead int64
	for _, p := range rep.Partitions {
		verified += p.Content.Verified
		dead += p.Content.DeadLetters
	}
	if verified+dead != 80 || dead != 9 {
		t.Fatalf("content: %d rows and %d dead letters verified, want 71 and 9", verified, dead)
	}
	floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{{Topic: "typed", Partition: 0}: 40, {Topic: "typed", Partition: 1}: 40})
}

// rewriteGroup commits, as floe's compaction does, one snapshot replacing
// every live file of tbl with one file of rows, recorded as a file group
// whose spans are the KeyFileGroups spans value spans (topic to
// "p:low-high,...").
func rewriteGroup(t *testing.T, tbl *snapshot.Table, rows []arrow.RecordBatch, spans map[string]string) {
	t.Helper()
	tasks, err := tbl.Iceberg().Scan().PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all := func(yield func(arrow.RecordBatch, error) bool) {
		for _, b := range rows {
			if !yield(b, nil) {
				return
			}
		}
	}
	var news []iceberg.DataFile
	var n int64
	for df, err := range table.WriteRecords(t.Context(), tbl.Iceberg(), rows[0].Schema(), all) {
		if err != nil {
			t.Fatal(err)
		}
		news = append(news, df)
		n += df.Count()
	}
	var paths []string
	for _, df := range news {
		paths = append(paths, df.FilePath())
	}
	groups := must(json.Marshal([]map[string]any{{"files": paths, "spans": spans}}))
	txn := tbl.Iceberg().NewTransaction()
	rw := txn.NewRewrite(iceberg.Properties{snapshot.KeyOperation: snapshot.OperationCompact, snapshot.KeyCompactRows: fmt.Sprint(n), mapping.KeyFileGroups: string(groups)})
	for _, task := range tasks {
		rw.DeleteFile(task.File)
	}
	for _, df := range news {
		rw.AddDataFile(df)
	}
	if err := rw.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestFaultTamperedCompactedGroup: a table of 3 partitions compacted into
// one file recorded as a file group is complete; then compaction
// snapshots carrying file groups that do not tell the truth about their
// file: a row lost (the group's joined ranges miscounted, named), a span
// reaching beyond the ledger (stray), a partition's rows held but its
// span left out (the group holds more than its ranges, and the
// partition's ranges nothing).
func TestFaultTamperedCompactedGroup(t *testing.T) {
	all := map[string]string{}
	t.Run("clean", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "grouped")
		res := compact(t, tbl)
		groups := must(tbl.CompactionGroups(t.Context(), res.SnapshotID))
		if res.FilesAfter != 1 || len(groups) != 1 || len(groups[0].Spans) != 3 {
			t.Fatalf("compaction %+v, groups %+v", res, groups)
		}
		rep := auditEveryLevel(t, e, tbl)
		for _, p := range rep.Partitions {
			if p.Files != 1 {
				t.Errorf("partition %s counts %d files, want the group's 1", p.TopicPartition, p.Files)
			}
		}
	})
	t.Run("row lost", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "lossy")
		all["lossy"] = "0:0-60,1:0-60,2:0-60"
		rewriteGroup(t, tbl, liveRows(t, tbl, iceberg.NotEqualTo(iceberg.Reference(mapping.ColOffset), int64(25))), all)
		delete(all, "lossy")
		expectFindings(t, e.audit(tbl, ledgerOnly))
		rep := e.audit(tbl, filesDepth)
		expectFindings(t, rep, "files count-mismatch lossy/0 [0, 60)", "files count-mismatch")
		for _, f := range rep.Findings {
			if f.HasPartition && !strings.Contains(f.Detail, "the 9 ranges of 3 partitions (lossy/0, lossy/1, lossy/2)") {
				t.Errorf("finding %+v does not name the group's ranges", f)
			}
		}
		expectFindings(t, e.audit(tbl, rowsDepth), "files count-mismatch lossy/0 [0, 60)", "files count-mismatch",
			"rows count-mismatch lossy/0 [20, 40)", "rows count-mismatch lossy/1 [20, 40)", "rows count-mismatch lossy/2 [20, 40)")
	})
	t.Run("span beyond the ledger", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "beyond")
		rewriteGroup(t, tbl, liveRows(t, tbl, iceberg.AlwaysTrue{}), map[string]string{"beyond": "0:0-60,1:0-60,2:0-70"})
		rep := e.audit(tbl, filesDepth)
		if !slices.Contains(findings(rep), "files stray-file beyond/2 [0, 70)") {
			var b strings.Builder
			_ = rep.WriteText(&b)
			t.Fatalf("no stray file for the span beyond the ledger:\n%s", b.String())
		}
	})
	t.Run("partition left out", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "partial")
		rewriteGroup(t, tbl, liveRows(t, tbl, iceberg.AlwaysTrue{}), map[string]string{"partial": "0:0-60,1:0-60"})
		rep := e.audit(tbl, filesDepth)
		// Partition 2's ranges: their files are gone (missing-file, or a
		// count mismatch when a sink's file group held them).
		p2 := 0
		for _, f := range rep.Findings {
			if f.Partition.Partition == 2 && (f.Kind == audit.KindMissingFile || f.Kind == audit.KindCountMismatch) {
				p2++
			}
		}
		if !slices.Contains(findings(rep), "files count-mismatch partial/0 [0, 60)") || p2 < 3 {
			var b strings.Builder
			_ = rep.WriteText(&b)
			t.Fatalf("want the group's count mismatch and partition 2's 3 ranges without files:\n%s", b.String())
		}
	})
}
