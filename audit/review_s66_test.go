package audit_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
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
	expectFindings(t, e.audit(tbl, rowsDepth), "rows count-mismatch dl/0 [0, 10)")
}
