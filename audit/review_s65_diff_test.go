package audit_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// interleavedLog writes to partition 0 of topic, in a one-partition
// topic, JSON values (bad ones: dead letters) and transactions whose
// records interleave with others' and whose markers lie far after their
// first record; with open, a last transaction is left open at the log end.
// mutate, when set, changes the value of the i-th record produced.
func interleavedLog(t *testing.T, e *env, topic string, open bool, mutate func(i int, v string) string) {
	t.Helper()
	n := 0
	val := func(v string) []byte {
		if mutate != nil {
			v = mutate(n, v)
		}
		n++
		return []byte(v)
	}
	rec := func(v string) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "k%d", n), Value: val(v)}
	}
	txn := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Brokers...), kgo.TransactionalID(id), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	plain := func(vs ...string) {
		var recs []*kgo.Record
		for _, v := range vs {
			recs = append(recs, rec(v))
		}
		e.Produce(recs)
	}
	in := func(cl *kgo.Client, vs ...string) {
		for _, v := range vs {
			if err := cl.ProduceSync(e.Ctx, rec(v)).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := func(cl *kgo.Client, commit bool) {
		if err := cl.EndTransaction(e.Ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	plain(`{"id":0}`, `{"id":1}`)
	p1 := txn(topic + "-p1")
	in(p1, `{"id":2}`)
	plain(`{"id":3}`, `not json`, `{"id":5}`)
	p2 := txn(topic + "-p2")
	in(p2, `{"id":6}`, `not json`)
	plain(`{"id":8}`, `{"id":"x"}`, `{"id":10}`, `{"id":11}`)
	in(p1, `{"id":12}`, `not json`, `{"id":14}`)
	in(p2, `{"id":15}`)
	plain(`{"id":16}`, `{"id":17}`)
	end(p2, false)
	plain(`{"id":19}`, `{"id":20}`, `not json`, `{"id":22}`)
	in(p1, `{"id":23}`)
	plain(`{"id":24}`)
	end(p1, true)
	p3 := txn(topic + "-p3")
	in(p3, `{"id":26}`, `not json`)
	plain(`{"id":28}`, `{"id":29}`)
	in(p3, `{"id":30}`)
	end(p3, true)
	plain(`{"id":32}`)
	if open {
		p4 := txn(topic + "-p4")
		in(p4, `{"id":33}`)
		plain(`{"id":34}`)
	}
}

// TestReviewS65DiffContentWindowsInterleaved: the windowed content level
// against the one-window one on a typed table with dead letters, whose
// transactions interleave with other records and each other, with
// markers many windows after their first records, an aborted one holding
// a bad record, and one open at the log end; then against a log whose
// records differ (content mismatches, dead letters that differ, committed
// records where the table has aborted ones).
func TestReviewS65DiffContentWindowsInterleaved(t *testing.T) {
	e := newEnv(t)
	const topic = "inter"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TypedTable("lake."+topic, mapping.Layout{Value: mapping.ValueJSON})
	interleavedLog(t, e, topic, true, nil)
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq, FlushRecords: 3})

	compare := func(what string, broker *connector.Broker, wantFindings bool) {
		t.Helper()
		opts := audit.Options{Depth: audit.DepthRows, Broker: broker, VerifyContent: true}
		if whole := sameInWindows(t, e, tbl, opts, what, 1, 2, 3, 5, 7); (len(whole.Findings) > 0) != wantFindings {
			t.Fatalf("%s: findings %v", what, findings(whole))
		}
	}
	compare("the table as sunk", e.Broker(), false)
	t.Logf("content: %+v", *e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}).Partitions[0].Content)

	// Another cluster's log: the same shape, other values here and there.
	other := newEnv(t)
	other.Topic(topic, 1, nil)
	interleavedLog(t, other, topic, true, func(i int, v string) string {
		switch i % 5 {
		case 1:
			return `{"id":"changed"}`
		case 3:
			return "other bytes"
		}
		return v
	})
	compare("against a log of other values", other.Broker(), true)
}

// TestReviewS65DiffContentWindowsCompacted: windows on a compacted topic
// whose holes lie across window edges (a window starting, ending and lying
// wholly inside a hole), with a transaction straddling windows; then the
// same table once the topic's policy is delete, where the holes are
// findings that must merge across windows as in one window.
func TestReviewS65DiffContentWindowsCompacted(t *testing.T) {
	e := newEnv(t)
	const topic = "compacted"
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	produce := func(keys ...string) { // one batch each: compaction keeps the last batch
		for _, k := range keys {
			e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(k), Value: []byte(k + "-v")}})
		}
	}
	tbl := e.Table("lake." + topic)
	produce("u0", "u1")
	produce("k1", "k2", "k3", "k4", "k5", "k6", "k7") // 2-8, superseded below
	produce("u9")
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 4})
	e.Txn(topic+"-t", []*kgo.Record{{Topic: topic, Key: []byte("t1"), Value: []byte("t1")}, {Topic: topic, Key: []byte("t2"), Value: []byte("t2")}, {Topic: topic, Key: []byte("t3"), Value: []byte("t3")}}, true)
	produce("k1", "k2", "k3", "k4", "k5", "k6", "k7", "z")
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 4})
	e.Stack.Cluster.Compact()

	compare := func(what string, wantFindings bool) {
		t.Helper()
		opts := audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}
		whole := sameInWindows(t, e, tbl, opts, what, 1, 2, 3, 4, 5, 7)
		if (len(whole.Findings) > 0) != wantFindings {
			t.Fatalf("%s: findings %v", what, findings(whole))
		}
		t.Logf("%s: content %+v, findings %q", what, *whole.Partitions[0].Content, details(whole))
	}
	compare("compacted topic", false)

	del := "delete"
	resp, err := kadm.NewClient(e.Broker().Client()).AlterTopicConfigs(e.Ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &del}}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	compare("delete topic", true)
}

// TestReviewS65DiffContentWindowsPendingDeadLetters: the windowed content
// level against the one-window one where the dead letters of a commit
// spanning every window are pending (in the commit's files, not in the
// dead-letter table), in a log of interleaved transactions.
func TestReviewS65DiffContentWindowsPendingDeadLetters(t *testing.T) {
	e := newEnv(t)
	const topic = "pend"
	e.Topic(topic, 1, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tbl, dlq := e.TypedTable("lake."+topic, layout)
	interleavedLog(t, e, topic, false, nil)
	hidden := []string{"lake", "hidden"}
	var once sync.Once
	hide := func(int, int64) {
		once.Do(func() {
			if _, err := tbl.Catalog().RenameTable(e.Ctx, dlq.Identifier(), hidden); err != nil {
				t.Error(err)
			}
		})
	}
	_, err := e.Env.Sink(e.Broker(), tbl, connector.Config{Topic: topic, DeadLetters: dlq, StopAtEnd: true, OnConsumed: hide})
	if _, pending := errors.AsType[*snapshot.DeadLettersPendingError](err); !pending {
		t.Fatalf("err = %v, want a DeadLettersPendingError", err)
	}
	if _, err := tbl.Catalog().RenameTable(e.Ctx, hidden, dlq.Identifier()); err != nil {
		t.Fatal(err)
	}
	tbl, _ = e.TypedTable("lake."+topic, layout)
	opts := audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}
	whole := sameInWindows(t, e, tbl, opts, "pending dead letters", 1, 2, 3, 5, 7)
	t.Logf("content %+v, findings %q", *whole.Partitions[0].Content, details(whole))
	if whole.Partitions[0].Content.DeadLetters == 0 {
		t.Fatalf("no dead letter checked: %+v", *whole.Partitions[0].Content)
	}
}

// progressSum records, per description, the total announced and the sum
// of the steps added.
type progressSum struct {
	mu    sync.Mutex
	total map[string]int64
	added map[string]int64
}

type progressOf struct {
	s    *progressSum
	desc string
}

func (p progressOf) Add(n int64) {
	p.s.mu.Lock()
	p.s.added[p.desc] += n
	p.s.mu.Unlock()
}
func (p progressOf) Finish() {}

func (s *progressSum) start(desc string, total int64) audit.Progress {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total[desc] += total
	return progressOf{s, desc}
}

// TestReviewS65DiffContentWindowsProgress: the content level's progress
// adds up to the total it announced, in windows as in one, on a log of
// interleaved transactions (reads past each window's end) with one open
// at the log end.
func TestReviewS65DiffContentWindowsProgress(t *testing.T) {
	e := newEnv(t)
	const topic = "prog"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TypedTable("lake."+topic, mapping.Layout{Value: mapping.ValueJSON})
	interleavedLog(t, e, topic, true, nil)
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq, FlushRecords: 3})
	for _, n := range []int64{1 << 40, 1, 3, 7} {
		s := &progressSum{total: map[string]int64{}, added: map[string]int64{}}
		opts := audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true, Progress: s.start}
		e.audit(tbl, audit.WithContentWindow(opts, n))
		for desc, total := range s.total {
			if strings.HasPrefix(desc, "content") && s.added[desc] != total {
				t.Errorf("windows of %d offsets: %q added %d of %d", n, desc, s.added[desc], total)
			}
		}
	}
}

// TestReviewS65DiffContentWindowsFileGroups: windows over the files a
// compaction merged across partitions (file groups: one file holds rows
// of the three partitions), as sunk and against a log of other values.
func TestReviewS65DiffContentWindowsFileGroups(t *testing.T) {
	e := newEnv(t)
	const topic = "lanes"
	e.MixedLog(topic, floetest.MixedLog{Partitions: 3, Records: 30, Committed: 6, Aborted: 5, Trailing: 9})
	tbl := e.Table("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 7})
	compact(t, tbl)
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(files, func(f snapshot.DataFile) bool { return f.PartitionMin != f.PartitionMax }) {
		t.Fatalf("no file of several partitions after compaction: %+v", files)
	}
	compare := func(what string, broker *connector.Broker, wantFindings bool) {
		t.Helper()
		opts := audit.Options{Depth: audit.DepthRows, Broker: broker, VerifyContent: true}
		if whole := sameInWindows(t, e, tbl, opts, what, 1, 4, 9); (len(whole.Findings) > 0) != wantFindings {
			t.Fatalf("%s: findings %v", what, findings(whole))
		}
	}
	compare("compacted into file groups", e.Broker(), false)
	other := newEnv(t)
	other.MixedLog(topic, floetest.MixedLog{Partitions: 3, Records: 31, Committed: 6, Aborted: 5, Trailing: 9})
	compare("against a log shifted by one record", other.Broker(), true)
}

// TestReviewS65DiffLargeFileBatches: ScanFiles delivers a file in
// batches of 16,384 rows; a file of 20,000 rows, a dead letter past the
// first batch, is complete at every level and its row and dead letter
// there are found.
func TestReviewS65DiffLargeFileBatches(t *testing.T) {
	e := newEnv(t)
	const topic = "large"
	const n = 20_000
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TypedTable("lake."+topic, mapping.Layout{Value: mapping.ValueJSON})
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Sprintf(`{"id":%d,"pad":"%040d"}`, i, i)
		if i == 19_000 {
			v = "not json"
		}
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
	}
	e.Produce(recs)
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq, FlushRecords: 2 * n, FlushBytes: 1 << 30})
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("%d files, want one", len(files))
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if !rep.Complete() {
		t.Fatalf("findings %v", findings(rep))
	}
	p := rep.Partitions[0]
	if p.Rows != n-1 || p.Content.Verified != n-1 || p.Content.DeadLetters != 1 {
		t.Fatalf("rows %d, content %+v", p.Rows, *p.Content)
	}
	tp := mapping.TopicPartition{Topic: topic}
	if _, ok, err := tbl.RowAt(t.Context(), 0, tp, 19_999, mapping.Commit{}); err != nil || !ok {
		t.Errorf("row at 19999: %v %v", ok, err)
	}
	if _, _, ok, err := dlq.DeadLetterAt(t.Context(), tp, 19_000, ""); err != nil || !ok {
		t.Errorf("dead letter at 19000: %v %v", ok, err)
	}
}

// TestReviewS65DiffLargeUpsertFile: an upsert table's file of 20,000 rows
// (two scan batches), whose keys past the first batch are updated and
// deleted by later commits (equality deletes), is complete at every level.
func TestReviewS65DiffLargeUpsertFile(t *testing.T) {
	e := newEnv(t)
	const topic = "largeup"
	const n = 20_000
	e.Topic(topic, 1, nil)
	tbl, dlq := e.UpsertTable("lake." + topic)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
	}
	e.Produce(recs)
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq, FlushRecords: 2 * n, FlushBytes: 1 << 30})
	var more []*kgo.Record
	for i := 17_000; i < 17_010; i++ {
		more = append(more, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "w%d", i)})
	}
	more = append(more, &kgo.Record{Topic: topic, Key: []byte("k19999")}) // a tombstone
	e.Produce(more)
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if !rep.Complete() {
		t.Fatalf("findings %v", findings(rep))
	}
	if got := rep.Partitions[0].Rows; got != n-1 {
		t.Errorf("rows %d, want %d", got, n-1)
	}
}

// retentionHook calls at once, the first time the content level's
// progress reaches after offsets.
type retentionHook struct {
	mu    sync.Mutex
	after int64
	added int64
	at    func()
	done  bool
}

func (h *retentionHook) start(desc string, total int64) audit.Progress {
	if !strings.HasPrefix(desc, "content") {
		return progressOf{&progressSum{total: map[string]int64{}, added: map[string]int64{}}, desc}
	}
	return h
}
func (h *retentionHook) Add(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.added += n
	if !h.done && h.added >= h.after {
		h.done = true
		h.at()
	}
}
func (h *retentionHook) Finish() {}

// TestReviewS65DiffContentWindowsRetentionDuringAudit: retention moves
// the log start past the next windows while the windowed content level
// runs (transactions straddling the new log start): the table is right,
// so no finding, and every row is verified or unverifiable.
func TestReviewS65DiffContentWindowsRetentionDuringAudit(t *testing.T) {
	for _, cut := range []int64{12, 17, 23} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			e := newEnv(t)
			const topic = "ret"
			e.Topic(topic, 1, nil)
			tbl, dlq := e.TypedTable("lake."+topic, mapping.Layout{Value: mapping.ValueJSON})
			interleavedLog(t, e, topic, false, nil)
			e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq, FlushRecords: 3})
			h := &retentionHook{after: 6, at: func() {
				if err := e.Stack.Cluster.DeleteRecords(topic, 0, cut); err != nil {
					t.Error(err)
				}
			}}
			opts := audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true, Progress: h.start}
			rep := e.audit(tbl, audit.WithContentWindow(opts, 3))
			if !h.done {
				t.Fatal("the hook never ran")
			}
			c := *rep.Partitions[0].Content
			t.Logf("content %+v, findings %q", c, details(rep))
			if len(rep.Findings) > 0 {
				t.Errorf("findings %q", details(rep))
			}
			if c.Verified+c.Unverifiable != rep.Partitions[0].Records {
				t.Errorf("verified %d + unverifiable %d != records %d", c.Verified, c.Unverifiable, rep.Partitions[0].Records)
			}
		})
	}
}
