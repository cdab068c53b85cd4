package connector_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// openTxn begins a transaction of transactional id id and produces recs in
// it; the caller ends it.
func openTxn(t *testing.T, e *env, id string, recs []*kgo.Record) *kgo.Client {
	t.Helper()
	txn := e.OpenTxn(id)
	if err := txn.ProduceSync(e.Ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return txn
}

// TestDeletedCommittedRecordsAreALoss: a bounded run stops at offset 10,
// where an open transaction begins. Another producer writes three committed
// records inside the transaction's span (15-17), the transaction is aborted,
// and retention deletes [10, 20) before the next run. The retained log shows
// only the transaction's abort marker: nothing the broker keeps shows what
// [10, 20) held, so the verdict must be a loss. (It used to be judged aborted:
// the three records were gone with no lost range and a complete audit.)
func TestDeletedCommittedRecordsAreALoss(t *testing.T) {
	e := newEnv(t)
	const topic = "txn-interleaved"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))                                                      // 0-9
	txn := openTxn(t, e, "long", records(topic, 0, 5, "txn1"))                                 // 10-14, aborted later
	e.Produce(records(topic, 0, 3, "committed"))                                               // 15-17, committed
	if err := txn.ProduceSync(e.Ctx, records(topic, 0, 2, "txn2")...).FirstErr(); err != nil { // 18-19
		t.Fatal(err)
	}
	tbl := e.Table("lake.txn_interleaved")
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if n := mustLedger(t, tbl).Next()[tp]; n != 10 {
		t.Fatalf("ledger next %d, want 10", n)
	}
	if err := txn.EndTransaction(e.Ctx, kgo.TryAbort); err != nil { // marker 20
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 5, "b")) // 21-25
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 20); err != nil {
		t.Fatal(err)
	}
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
	var loss *connector.DataLossError
	if errors.As(err, &loss) {
		return // the deleted committed records are reported
	}
	if err != nil {
		t.Fatal(err)
	}
	rep, aerr := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if aerr != nil {
		t.Fatal(aerr)
	}
	cov := mapping.Cover(mustLedger(t, tbl).Ranges(tp))
	t.Fatalf("committed records 15-17 were deleted before they were sunk, yet the run succeeded: ledger lost %v, rows %v; audit complete=%v. "+
		"Want a DataLossError (or a recorded lost range)", cov.Lost, offsetsOf(t, tbl, tp), rep.Complete())
}

// TestLossAtSessionStartCommittedWhenIdle: a live sink with
// --on-data-loss record starts behind the log start of a partition that
// receives nothing more. The loss it finds at session start is committed on
// time, not when a later record sets a flush deadline (meanwhile the ledger
// and the audit disagreed with the running sink).
func TestLossAtSessionStartCommittedWhenIdle(t *testing.T) {
	e := newEnv(t)
	const topic, table = "idle-start", "lake.idle_start"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	tbl := e.Table(table)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 50, "b")) // 100-149
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 150); err != nil {
		t.Fatal(err)
	}
	stop := e.runLive(tbl, connector.Config{Topic: topic, OnDataLoss: connector.LossRecord, FlushInterval: 100 * time.Millisecond})
	defer stop()
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	reader := e.Table(table)
	deadline := time.Now().Add(8 * time.Second) // 80 flush intervals, 4 retention checks
	for time.Now().Before(deadline) {
		if err := reader.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		if mustLedger(t, reader).Next()[tp] == 150 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep, err := audit.Run(e.Ctx, reader, audit.Options{Broker: e.Dial()})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []audit.Kind
	for _, f := range rep.Findings {
		kinds = append(kinds, f.Kind)
	}
	t.Fatalf("after 8s (flush interval 100ms) the running sink has not committed the loss [100, 150) it found at start: ledger next %d, audit findings %v",
		mustLedger(t, reader).Next()[tp], kinds)
}

// TestRetentionCheckKeepsBufferedRecords: records the client has fetched and
// buffered, but that polls have not returned yet, are never declared lost by
// the retention check. A poll returns at most FlushRecords-pending records
// and an iteration can take seconds (the loop waits for the previous commit),
// so the later partitions of a large fetch wait in the buffer and look
// stalled. Here every record of both partitions is buffered before retention
// deletes them, and the loop is slow for three iterations: all 60 rows land
// and there is no loss.
func TestRetentionCheckKeepsBufferedRecords(t *testing.T) {
	e := newEnv(t)
	const topic, n = "buffered", 30
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, n, "a"))
	e.Produce(records(topic, 1, n, "a"))
	var (
		mu       sync.Mutex
		buffered = map[int32]int64{}
	)
	hook := bufferedHook(func(r *kgo.Record) {
		mu.Lock()
		buffered[r.Partition] = max(buffered[r.Partition], r.Offset+1)
		mu.Unlock()
	})
	b, err := connector.Dial(e.Ctx, e.Stack.Brokers, 5*time.Second, kgo.WithHooks(hook))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tbl := e.Table("lake.buffered")
	deleted, slow := false, 0
	stats, err := e.Env.Sink(b, tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1,
		OnRecords: func(int64) {
			if !deleted {
				mu.Lock()
				inHand := buffered[0] == n && buffered[1] == n
				mu.Unlock()
				if !inHand {
					return
				}
				// Every record of both partitions is in the client.
				for p := range int32(2) {
					if err := e.Stack.Cluster.DeleteRecords(topic, p, n); err != nil {
						t.Error(err)
					}
				}
				deleted = true
			}
			if slow < 3 { // three slow iterations: two retention checks see a stall
				slow++
				time.Sleep(2100 * time.Millisecond)
			}
		}})
	if !deleted {
		t.Fatalf("setup: the records were not all buffered before the run ended (err %v)", err)
	}
	if err != nil {
		t.Fatalf("every record was fetched before retention deleted it, yet: %v", err)
	}
	if stats.Records != 2*n {
		t.Fatalf("%d rows, want all %d the client held", stats.Records, 2*n)
	}
}

// bufferedHook is a kgo.HookFetchRecordBuffered.
type bufferedHook func(*kgo.Record)

func (h bufferedHook) OnFetchRecordBuffered(r *kgo.Record) { h(r) }

// TestClassifyErrorIsNotALoss: a failed request while classifying deleted
// offsets (here a leader move: NOT_LEADER_OR_FOLLOWER) is retried, never
// turned into a loss: offsets that held only aborted records used to become
// a lost range the ledger kept forever.
func TestClassifyErrorIsNotALoss(t *testing.T) {
	e := newEnv(t)
	const topic = "txn-flaky"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))                       // 0-9
	txn := openTxn(t, e, "flaky", records(topic, 0, 10, "txn")) // 10-19
	tbl := e.Table("lake.txn_flaky")
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(e.Ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 5, "b"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 15); err != nil {
		t.Fatal(err)
	}
	// The next read_committed fetch outside a fetch session (the
	// classification's) meets a leader move.
	e.Stack.Cluster.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.FetchRequest)
		if req.IsolationLevel != 1 || req.SessionEpoch != -1 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = req.Version
		for _, rt := range req.Topics {
			st := kmsg.NewFetchResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, OnDataLoss: connector.LossRecord}); err != nil {
		t.Fatal(err)
	}
	if cov := mapping.Cover(mustLedger(t, tbl).Ranges(tp)); len(cov.Lost) > 0 {
		t.Fatalf("only aborted records were deleted, but one failed fetch made the ledger record lost %v for good", cov.Lost)
	}
}
