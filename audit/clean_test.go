package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// auditEveryLevel audits tbl at every depth, without and with a broker and
// content verification, and fails on any finding. It returns the deepest
// report.
func auditEveryLevel(t *testing.T, e *env, tbl *snapshot.Table) *audit.Report {
	t.Helper()
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth} {
		expectFindings(t, e.audit(tbl, opts))
		opts.Broker = e.Broker()
		expectFindings(t, e.audit(tbl, opts))
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep)
	if !rep.Complete() {
		t.Fatal("report with no findings is not complete")
	}
	return rep
}

// contentTotals sums the content statistics of every partition.
func contentTotals(rep *audit.Report) audit.ContentStats {
	var s audit.ContentStats
	for _, p := range rep.Partitions {
		if c := p.Content; c != nil {
			s.Verified += c.Verified
			s.Markers += c.Markers
			s.Aborted += c.Aborted
			s.Compacted += c.Compacted
			s.Folded += c.Folded
			s.Unverifiable += c.Unverifiable
			s.DeadLetters += c.DeadLetters
		}
	}
	return s
}

func TestCleanTransactions(t *testing.T) {
	e := newEnv(t)
	const topic = "events"
	// Partition 0 goes on after the aborted transaction; the others end in
	// its abort marker.
	rows := e.MixedLog(topic, floetest.MixedLog{Partitions: 3, Records: 120, Committed: 10, Aborted: 7, Trailing: 25})

	tbl := e.Table("lake.events")
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 50})
	rep := auditEveryLevel(t, e, tbl)

	if rep.RowsRead == 0 || len(rep.Partitions) != 3 {
		t.Fatalf("report: %d rows read, %d partitions", rep.RowsRead, len(rep.Partitions))
	}
	c := contentTotals(rep)
	// Two markers per partition (commit and abort), 7 aborted records each.
	if c.Verified != int64(rows) || c.Markers != 6 || c.Aborted != 21 || c.Compacted != 0 || c.Unverifiable != 0 {
		t.Fatalf("content %+v, want %d verified, 6 markers, 21 aborted", c, rows)
	}
	for _, p := range rep.Partitions {
		if p.Broker == nil || p.Broker.Lag != 0 || p.Next != p.Broker.HighWatermark {
			t.Fatalf("%s: broker %+v next %d: want no lag", p.TopicPartition, p.Broker, p.Next)
		}
	}
}

func TestCleanCompactedTopic(t *testing.T) {
	e := newEnv(t)
	const topic = "state"
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	// Each produce call is one batch; compaction keeps the last batch.
	// Keys: u0 is unique (kept, log start stays 0); k1..k3 repeat.
	produce := func(key string, n int) {
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(strings.Repeat("x", i+1))})
		}
		e.Produce(recs)
	}
	produce("u0", 1)
	produce("k1", 3)
	produce("k2", 3)
	e.Stack.Cluster.Compact() // before the sink: the sink reads holes
	produce("k1", 2)
	produce("k3", 1)

	tbl := e.Table("lake.state")
	e.sink(tbl, connector.Config{Topic: topic})
	produce("k2", 2)
	produce("k4", 1)
	e.Stack.Cluster.Compact() // after the sink: rows whose records are gone
	e.sink(tbl, connector.Config{Topic: topic})

	rep := auditEveryLevel(t, e, tbl)
	c := contentTotals(rep)
	if c.Compacted == 0 || c.Unverifiable == 0 {
		t.Fatalf("content %+v: want compacted offsets and rows compacted after the sink", c)
	}
	p := rep.Partitions[0]
	if p.First != 0 || p.Next != p.Broker.HighWatermark {
		t.Fatalf("coverage [%d, %d), broker %+v", p.First, p.Next, p.Broker)
	}
}

func TestCleanAfterRetention(t *testing.T) {
	e := newEnv(t)
	const topic = "retained"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 80, "a"))
	e.Produce(records(topic, 1, 40, "a"))
	tbl := e.Table("lake.retained")
	e.sink(tbl, connector.Config{Topic: topic})
	// Retention moves the log start after everything was sunk: all of
	// partition 0, half of partition 1.
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 80); err != nil {
		t.Fatal(err)
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 1, 20); err != nil {
		t.Fatal(err)
	}
	rep := auditEveryLevel(t, e, tbl)
	if c := contentTotals(rep); c.Verified != 20 {
		t.Fatalf("content %+v: want the 20 retained records verified", c)
	}
	for _, p := range rep.Partitions {
		want := map[int32]int64{0: 80, 1: 20}[p.Partition]
		if p.Broker.LogStart != want {
			t.Fatalf("%s: log start %d, want %d", p.TopicPartition, p.Broker.LogStart, want)
		}
	}
}

// TestCleanHandMadeContiguous checks that commits which are contiguous but
// made by hand, with ranges holding offsets without rows, audit clean
// without a broker.
func TestCleanHandMadeContiguous(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.hand")
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	commit(t, tbl, tp, 0, 10, span(0, 10))
	commit(t, tbl, tp, 10, 20, []int64{10, 12, 19}) // offsets without rows: markers, aborted
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth} {
		rep := e.audit(tbl, opts)
		expectFindings(t, rep)
		if p := rep.Partitions[0]; p.First != 0 || p.Next != 20 || p.Records != 13 || p.Ranges != 2 {
			t.Fatalf("partition report %+v", p)
		}
	}
}

// TestEvidenceDigest checks that the digest is stable for one metadata
// version, changes with the ledger, and can be recomputed from the ledger
// and the metadata location alone.
func TestEvidenceDigest(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.evidence")
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	commit(t, tbl, tp, 0, 10, span(0, 10))
	first := e.audit(tbl, filesDepth).Evidence
	if again := e.audit(tbl, rowsDepth).Evidence; again != first {
		t.Fatalf("evidence changed between two audits of the same metadata: %+v, %+v", first, again)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(audit.Canonical(tbl.Iceberg().MetadataLocation(), l))
	if first.Digest != "sha256:"+hex.EncodeToString(sum[:]) || first.MetadataLocation != tbl.Iceberg().MetadataLocation() {
		t.Fatalf("evidence %+v is not the digest of the canonical ledger", first)
	}
	commit(t, tbl, tp, 10, 20, span(10, 20))
	if next := e.audit(tbl, filesDepth).Evidence; next.Digest == first.Digest || next.Commits != 2 {
		t.Fatalf("evidence after a commit: %+v, before %+v", next, first)
	}
}

// TestCleanTwoTopics audits a table holding the same partition number of
// two topics: the rows level then reads the topic column too, and --topic
// narrows the report to one topic.
func TestCleanTwoTopics(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.two")
	a, b := mapping.TopicPartition{Topic: "a", Partition: 0}, mapping.TopicPartition{Topic: "b", Partition: 0}
	commit(t, tbl, a, 0, 10, span(0, 10))
	commit(t, tbl, b, 0, 10, span(0, 8))
	commit(t, tbl, a, 10, 12, span(10, 12))
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth} {
		rep := e.audit(tbl, opts)
		expectFindings(t, rep)
		if len(rep.Partitions) != 2 {
			t.Fatalf("%d partitions, want a/0 and b/0", len(rep.Partitions))
		}
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Topic: "b"})
	expectFindings(t, rep)
	if len(rep.Partitions) != 1 || rep.Partitions[0].TopicPartition != b || rep.Partitions[0].Rows != 8 {
		t.Fatalf("--topic b: partitions %+v", rep.Partitions)
	}
	// A commit of topic b whose range claims one row more than it wrote.
	commit(t, tbl, b, 10, 20, span(10, 15))
	f := snapshot.Flush{Ranges: []mapping.Range{{TopicPartition: b, Interval: mapping.Interval{Low: 20, High: 25}, Records: 1}}}
	if _, err := tbl.Commit(e.Ctx, f, snapshot.CommitOptions{Writer: "test", Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	expectFindings(t, e.audit(tbl, rowsDepth), "files count-mismatch b/0 [20, 25)", "rows count-mismatch b/0 [20, 25)")
	expectFindings(t, e.audit(tbl, audit.Options{Depth: audit.DepthRows, Topic: "a"}))
}
