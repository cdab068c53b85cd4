package audit_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// s66Rows is the batch of rows a sink makes of recs, whose offsets are
// set.
func s66Rows(t testing.TB, tbl *snapshot.Table, recs []*kgo.Record) arrow.RecordBatch {
	t.Helper()
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for _, r := range recs {
		rb.Append(r)
	}
	return rb.NewBatch()
}

// s66Log produces n records of tp in one committed transaction (offsets
// [0, n), its marker at n) and returns them with their offsets set.
func s66Log(e *env, tp mapping.TopicPartition, n int) []*kgo.Record {
	e.T.Helper()
	e.Topic(tp.Topic, tp.Partition+1, nil)
	e.Txn(tp.Topic+"-txn", records(tp.Topic, tp.Partition, n, "a"), true)
	recs := records(tp.Topic, tp.Partition, n, "a")
	for i, r := range recs {
		r.Offset = int64(i)
	}
	return recs
}

// TestReviewS66AuditContentWithoutDeepDuplicate: a commit (a sink that
// appended one record's row twice to its flush) whose range [0, 10) holds
// 9 committed records and their transaction's marker, and whose file and
// ledger count 10 rows: offset 5 twice. floe audit --brokers
// --verify-content without --deep said COMPLETE, "accounted for by the
// ledger, the file list and the log's records": the files level's counts
// agree, and the content level read both rows of offset 5 and kept one
// (duplicates were the rows level's, which did not run). It must find the
// duplicate.
func TestReviewS66AuditContentWithoutDeepDuplicate(t *testing.T) {
	e := newEnv(t)
	tp := mapping.TopicPartition{Topic: "dup", Partition: 0}
	recs := s66Log(e, tp, 9)
	tbl := e.Table("lake.dup")
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: 10}, Records: 10}},
		s66Rows(t, tbl, append(recs, recs[5])))
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthFiles, Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep, "content duplicate dup/0 [5, 6)")
	// With --deep, the rows level finds it, and the content level does
	// not find it again.
	rep = e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep, "rows duplicate dup/0 [5, 6)", "rows count-mismatch dup/0 [0, 10)")
}

// TestReviewS66AuditDeadLettersInNoTable: a commit whose range [0, 10)
// counts 9 rows and 1 dead letter, naming no dead-letter table (a ledger
// floe's encoding accepts: dead letters without dead-letter files), of a
// table that has no dead-letter table at all: the record at offset 4 is
// in neither table. floe audit --deep said COMPLETE, "accounted for by
// the ledger, the file list and the data files' rows": the rows level
// counted each range's dead letters only when the table had a
// dead-letter table. It must find the range's dead letter missing.
func TestReviewS66AuditDeadLettersInNoTable(t *testing.T) {
	e := newEnv(t)
	tp := mapping.TopicPartition{Topic: "dl", Partition: 0}
	e.Topic(tp.Topic, 1, nil)
	e.Produce(records(tp.Topic, 0, 10, "a"))
	recs := records(tp.Topic, 0, 10, "a")
	for i, r := range recs {
		r.Offset = int64(i)
	}
	tbl := e.Table("lake.dl")
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: 10}, Records: 9, DeadLetters: 1}},
		s66Rows(t, tbl, append(recs[:4:4], recs[5:]...)))
	expectFindings(t, e.audit(tbl, rowsDepth), "ledger count-mismatch", "rows count-mismatch dl/0 [0, 10)")
}

// TestReviewS66AuditDeadLettersInNoTableDefault: the table of
// TestReviewS66AuditDeadLettersInNoTable at the default levels, which
// compare the dead-letter tables with the ledger: they said COMPLETE,
// since only commits that name a dead-letter table were compared.
func TestReviewS66AuditDeadLettersInNoTableDefault(t *testing.T) {
	e := newEnv(t)
	tp := mapping.TopicPartition{Topic: "dl", Partition: 0}
	e.Topic(tp.Topic, 1, nil)
	tbl := e.Table("lake.dl")
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: 10}, Records: 9, DeadLetters: 1}},
		batch(t, tbl, tp, 0, 1, 2, 3, 5, 6, 7, 8, 9))
	for _, opts := range []audit.Options{ledgerOnly, filesDepth} {
		expectFindings(t, e.audit(tbl, opts), "ledger count-mismatch")
	}
}

// s66JSONLog produces, on each of partitions, plain records, a committed
// and an aborted transaction of JSON values, every sixth not JSON and
// every sixth a kind conflict (dead letters); n numbers the values.
func s66JSONLog(e *env, topic string, partitions int32, n *int) {
	e.T.Helper()
	mk := func(p int32, k int) []*kgo.Record {
		var out []*kgo.Record
		for range k {
			*n++
			v := fmt.Sprintf(`{"id":%d,"p":%d}`, *n, p)
			switch *n % 6 {
			case 1:
				v = "{bad"
			case 4:
				v = fmt.Sprintf(`{"id":"s%d"}`, *n)
			}
			out = append(out, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", *n%5), Value: []byte(v)})
		}
		return out
	}
	for p := range partitions {
		e.Produce(mk(p, 6))
		e.Txn(fmt.Sprintf("%s-c%d", topic, p), mk(p, 4), true)
		e.Txn(fmt.Sprintf("%s-a%d", topic, p), mk(p, 3), false)
	}
}

// s66Compact compacts each table, failing t on error.
func s66Compact(t *testing.T, tbls ...*snapshot.Table) {
	t.Helper()
	for _, x := range tbls {
		if _, err := x.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
}

// s66Expire expires all but the last snapshot of tbl's branches (their
// ledger archived).
func s66Expire(t *testing.T, tbl *snapshot.Table, keep int) {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: keep, Logger: quietLogger()}); err != nil || len(res.Expired) == 0 {
		t.Fatalf("expiry: %+v, %v", res, err)
	}
}

// s66Every audits tbl at the files and rows depths, with the content level
// in one window and in windows of 3 and 7 offsets, and fails unless each
// report has exactly the wanted findings.
func s66Every(t *testing.T, e *env, tbl *snapshot.Table, what string, want ...string) {
	t.Helper()
	for _, d := range []audit.Depth{audit.DepthFiles, audit.DepthRows} {
		rep := sameInWindows(t, e, tbl, audit.Options{Depth: d, Broker: e.Broker(), VerifyContent: true}, what, 3, 7)
		expectFindings(t, rep, want...)
	}
}

// TestReviewS66AuditHoldsLongLedger: a JSON table with dead letters over
// three partitions, sunk in flushes of 3 records (many commits per
// partition) over four rounds of plain records, committed and aborted
// transactions; retention deletes unsunk offsets of partition 2 (recorded
// lost); data and dead-letter tables are compacted (file groups across
// partitions) and snapshots expired with the ledger archived. Every
// depth, the content level in windows that cut transactions and commits,
// finds the loss and nothing else.
func TestReviewS66AuditHoldsLongLedger(t *testing.T) {
	e := newEnv(t)
	const topic = "long"
	e.Topic(topic, 3, nil)
	tbl, dlq := e.TypedTable("lake.long", mapping.Layout{Value: mapping.ValueJSON})
	n := 0
	for round := range 4 {
		s66JSONLog(e, topic, 3, &n)
		if round == 2 {
			tp := mapping.TopicPartition{Topic: topic, Partition: 2}
			if err := e.Stack.Cluster.DeleteRecords(topic, 2, e.HighWatermarks(topic)[tp]-4); err != nil {
				t.Fatal(err)
			}
		}
		e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq, FlushRecords: 3, OnDataLoss: connector.LossRecord})
		if round%2 == 1 {
			s66Compact(t, tbl, dlq)
		}
		if round == 2 {
			s66Expire(t, tbl, 2)
		}
	}
	s66Every(t, e, tbl, "long ledger", "ledger lost long/2 [30, 41)")
}

// TestReviewS66AuditHoldsReplayPublished: the same kind of table replayed
// into a branch that is published, main's history tagged; then sunk
// further, compacted and expired. Main and the tag are complete at every
// depth throughout.
func TestReviewS66AuditHoldsReplayPublished(t *testing.T) {
	e := newEnv(t)
	const topic = "rp"
	e.Topic(topic, 2, nil)
	tbl, dlq := e.TypedTable("lake.rp", mapping.Layout{Value: mapping.ValueJSON})
	n := 0
	for range 2 {
		s66JSONLog(e, topic, 2, &n)
		e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq, FlushRecords: 6})
	}
	cat, ident := e.CatalogOf("lake.rp")
	if res, err := replay.Run(e.Ctx, e.Broker(), cat, ident, replay.Options{Topic: topic, Branch: "rebuild", Publish: true, TagMain: "before",
		Sink: connector.Config{FlushRecords: 9, Logger: quietLogger()}}); err != nil || !res.Published {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	tag := e.OpenTable("lake.rp", snapshot.OpenOptions{Branch: "before", ReadTag: true})
	s66Every(t, e, tbl, "published")
	s66Every(t, e, tag, "tag")
	s66JSONLog(e, topic, 2, &n)
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq, FlushRecords: 4})
	s66Compact(t, tbl, dlq)
	s66Expire(t, tbl, 1)
	s66Every(t, e, tbl, "sunk, compacted and expired after the publish")
	if err := tag.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	s66Every(t, e, tag, "tag after the expiry")
}

// TestReviewS66AuditEventTableSkipped: an event table (append mode, the
// default) whose commit's range [0, 10) counts 8 rows, 1 delete and 1
// skipped record, counts only an upsert table's sink makes, with 8 rows:
// the records at offsets 4 and 5 are in no table. floe audit said
// COMPLETE at the default levels and with --deep: the files and rows
// levels of an event table compare the rows with the ranges' records
// only, and the ledger level took the deletes and skipped records for
// accounted for. In an event table every committed record is a row or a
// dead letter: the ledger level must say so.
func TestReviewS66AuditEventTableSkipped(t *testing.T) {
	e := newEnv(t)
	tp := mapping.TopicPartition{Topic: "sk", Partition: 0}
	e.Topic(tp.Topic, 1, nil)
	e.Produce(records(tp.Topic, 0, 10, "a"))
	recs := records(tp.Topic, 0, 10, "a")
	for i, r := range recs {
		r.Offset = int64(i)
	}
	tbl := e.Table("lake.sk")
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: 10}, Records: 8, Deletes: 1, Skipped: 1}},
		s66Rows(t, tbl, append(recs[:4:4], recs[6:]...)))
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth} {
		expectFindings(t, e.audit(tbl, opts), "ledger count-mismatch sk/0 [0, 10)")
	}
}

// TestReviewS66AuditHoldsTwoTopicsRolledBack: two topics with the same
// partition numbers sunk into one JSON table with dead letters, compacted
// (file groups across topics) and expired; main is then rolled back two
// sinks, leaving dead letters of commits no ledger has (stray, until
// maintenance), and expired, which archives the rolled-back line too.
// After maintenance and a sink that takes the offsets again, every depth,
// of the table and of each --topic, is complete.
func TestReviewS66AuditHoldsTwoTopicsRolledBack(t *testing.T) {
	e := newEnv(t)
	e.Topic("ta", 2, nil)
	e.Topic("tb", 2, nil)
	tbl, dlq := e.TypedTable("lake.two", mapping.Layout{Value: mapping.ValueJSON})
	n := 0
	var heads []int64
	for round := range 3 {
		s66JSONLog(e, "ta", 2, &n)
		s66JSONLog(e, "tb", 2, &n)
		e.sink(tbl, connector.Config{Topic: "ta", DeadLetters: dlq, FlushRecords: 4})
		e.sink(tbl, connector.Config{Topic: "tb", DeadLetters: dlq, FlushRecords: 5})
		if round == 0 {
			s66Compact(t, tbl, dlq)
			s66Expire(t, tbl, 2)
		}
		if err := tbl.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		heads = append(heads, tbl.Head().SnapshotID)
	}
	s66Every(t, e, tbl, "two topics")
	upd := []table.Update{table.NewSetSnapshotRefUpdate(table.MainBranch, heads[0], table.BranchRef, -1, -1, -1)}
	if _, _, err := tbl.Catalog().CommitTable(e.Ctx, tbl.Identifier(), nil, upd); err != nil {
		t.Fatal(err)
	}
	expectFindings(t, e.audit(tbl, filesDepth), "ledger stray-dead-letters")
	s66Expire(t, tbl, 1)
	s66Every(t, e, tbl, "rolled back and expired")
	e.sink(tbl, connector.Config{Topic: "ta", DeadLetters: dlq, FlushRecords: 7})
	e.sink(tbl, connector.Config{Topic: "tb", DeadLetters: dlq, FlushRecords: 3})
	s66Every(t, e, tbl, "sunk again")
	for _, topic := range []string{"ta", "tb"} {
		expectFindings(t, e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true, Topic: topic}))
	}
}

// TestReviewS66AuditMissingDeadLetterMessage: a dead letter deleted from
// the dead-letter table by another tool's delete file. The content level
// said "the committed records at offsets [5, 6) have no row", as of a row
// the table lost, where the record is a dead letter the dead-letter table
// lost (the ledger level's count-mismatch says so): the detail must say
// the record is neither a row nor a dead letter.
func TestReviewS66AuditMissingDeadLetterMessage(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	jsonLog(e, "orders", `{"id":1}`, ``, `{"id":2}`, `{"id":"x"}`, `{"id":3}`, ``, `{"id":4}`)
	e.sink(tbl, connector.Config{Topic: "orders", DeadLetters: dlq, FlushRecords: 3})
	floetest.ForeignEqualityDelete(t, dlq.Iceberg(), 0, 5)
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep, "content missing-row orders/0 [5, 6)", "ledger count-mismatch")
	for _, f := range rep.Findings {
		if f.Kind == audit.KindMissingRow && !strings.Contains(f.Detail, "no dead letter") {
			t.Fatalf("detail %q", f.Detail)
		}
	}
}
