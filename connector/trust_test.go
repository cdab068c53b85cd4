package connector_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// runLive starts a live sink of cfg.Topic into tbl and returns a function
// that stops it and returns its result.
func (e *env) runLive(tbl *snapshot.Table, cfg connector.Config) (stop func() (connector.Stats, error)) {
	e.T.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	type result struct {
		stats connector.Stats
		err   error
	}
	done := make(chan result, 1)
	go func() {
		st, err := s.Run(ctx)
		done <- result{st, err}
	}()
	return func() (connector.Stats, error) {
		cancel()
		r := <-done
		return r.stats, r.err
	}
}

// offsetsOf returns the offsets of the table's rows of one partition.
func offsetsOf(t testing.TB, tbl *snapshot.Table, tp mapping.TopicPartition) []int64 {
	t.Helper()
	var out []int64
	for _, r := range rows(t, tbl) {
		if r.TP == tp {
			out = append(out, r.Offset)
		}
	}
	slices.Sort(out)
	return out
}

// TestStartLatestSurvivesRestart: --start latest applies once, like
// Kafka's auto.offset.reset. A live sink started with it and stopped before
// an idle partition produced a row used to keep that partition's start only
// in memory: the next run evaluated latest again and never sank what was
// written in between, while the audit said complete. Every partition's
// start is now in the ledger before anything is read.
func TestStartLatestSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	const topic, table = "latest", "lake.latest"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 20, "before"))
	tbl := e.Table(table)
	p0, p1 := mapping.TopicPartition{Topic: topic, Partition: 0}, mapping.TopicPartition{Topic: topic, Partition: 1}
	cfg := connector.Config{Topic: topic, Start: connector.StartLatest, FlushInterval: 100 * time.Millisecond}
	stop := e.runLive(tbl, cfg)
	// Latest is where partition 0 ends when the sink starts: once its
	// start is in the ledger. A record produced before that is before the
	// start (a slow start under load made the test expect a row latest
	// had rightly skipped).
	waitForNext(t, e, table, p0, 20)
	// Partition 0 gets one record, so the run is known to be sinking;
	// partition 1 stays idle.
	e.Produce(records(topic, 0, 1, "live"))
	waitForNext(t, e, table, p0, 21)
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	// Producers go on while the sink is down (a deploy).
	e.Produce(records(topic, 0, 5, "down"))
	e.Produce(records(topic, 1, 7, "down"))
	stop = e.runLive(tbl, cfg)
	e.Produce(records(topic, 1, 1, "back"))
	waitForNext(t, e, table, p0, 26)
	waitForNext(t, e, table, p1, 8)
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := offsetsOf(t, tbl, p0); len(got) != 6 || got[0] != 20 {
		t.Fatalf("partition 0 rows at %v, want offsets 20 to 25", got)
	}
	if got := offsetsOf(t, tbl, p1); len(got) != 8 || got[0] != 0 {
		t.Fatalf("partition 1 rows at %v, want offsets 0 to 7: the records written while the sink was down were skipped", got)
	}
	l := mustLedger(t, tbl)
	for tp, first := range map[mapping.TopicPartition]int64{p0: 20, p1: 0} {
		if c := mapping.Cover(l.Ranges(tp)); !c.Started || c.First != first || len(c.Gaps) > 0 {
			t.Fatalf("%s coverage %+v: want a recorded start at %d and no gap", tp, c, first)
		}
	}
}

// TestSinkRefusesRecreatedTopicByID: a topic deleted and recreated, then
// refilled past the ledger's next offset, used to be resumed in the middle
// of the new log. The ledger records the topic ID; a sink of a topic with
// another ID is refused, naming both.
func TestSinkRefusesRecreatedTopicByID(t *testing.T) {
	e := newEnv(t)
	const topic = "refilled"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	tbl := e.Table("lake.refilled")
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	old, err := e.Dial().Topic(e.Ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if id := mustLedger(t, tbl).TopicID(topic); id == "" || id != old.ID {
		t.Fatalf("ledger topic id %q, want the broker's %q", id, old.ID)
	}
	if err := e.Stack.Cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "b"))
	reborn, err := e.Dial().Topic(e.Ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	before := len(mustLedger(t, tbl).Commits)
	_, err = e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
	var idErr *snapshot.TopicIDError
	if !errors.As(err, &idErr) || idErr.Ledger != old.ID || idErr.Broker != reborn.ID ||
		!strings.Contains(err.Error(), old.ID) || !strings.Contains(err.Error(), reborn.ID) || !strings.Contains(err.Error(), topic) {
		t.Fatalf("err %v: want a refusal naming topic %s and both ids %s, %s", err, topic, old.ID, reborn.ID)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if after := len(mustLedger(t, tbl).Commits); after != before {
		t.Fatalf("commits %d -> %d: the refused run wrote to the table", before, after)
	}
}

// TestSinkFencedWhenRolledBack: an operator rolls the table back to before a
// live sink's partition entered the ledger. The sink's next commit must not
// land on top (the partition would restart at the sink's in-memory offset,
// and everything below it would be gone): the sink is fenced, re-reads the
// ledger and sinks the partition again from its start.
func TestSinkFencedWhenRolledBack(t *testing.T) {
	e := newEnv(t)
	const topic, table = "rolled", "lake.rolled"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 1, 10, "a"))
	tbl := e.Table(table)
	// Partition 1 first, alone: the snapshot the operator rolls back to.
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, Partitions: []int32{1}}); err != nil {
		t.Fatal(err)
	}
	before := tbl.Head().SnapshotID
	var mu sync.Mutex
	fenced := 0
	stop := e.runLive(tbl, connector.Config{Topic: topic, Partitions: []int32{0}, FlushInterval: 100 * time.Millisecond,
		OnFenced: func(error) { mu.Lock(); fenced++; mu.Unlock() }})
	p0 := mapping.TopicPartition{Topic: topic, Partition: 0}
	e.Produce(records(topic, 0, 50, "a"))
	waitForNext(t, e, table, p0, 50)
	op := e.Table(table)
	txn := op.Iceberg().NewTransaction()
	if err := txn.RollbackToSnapshot(before); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 10, "b"))
	waitForNext(t, e, table, p0, 60)
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fenced == 0 {
		t.Fatal("the sink was not fenced by the rollback")
	}
	checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{p0: 60, {Topic: topic, Partition: 1}: 10})
}

// TestLiveSinkNoticesIdleLoss: retention deletes everything after a live
// sink's position while nothing more arrives. No record ever reveals the
// jump, so the sink must look at the log start on its own: it used to idle
// on while the audit reported an unrecorded loss.
func TestLiveSinkNoticesIdleLoss(t *testing.T) {
	for _, policy := range []connector.OnDataLoss{connector.LossFail, connector.LossRecord} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t)
			const topic, table = "idle", "lake.idle"
			e.Topic(topic, 1, nil)
			e.produceOneByOne(records(topic, 0, 300, "a"))
			tbl := e.Table(table)
			// One batch per fetch: the sink is still reading when
			// everything is deleted.
			slow, err := connector.Dial(e.Ctx, e.Stack.Brokers, 5*time.Second, kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1))
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			var once sync.Once
			s, err := connector.NewSink(slow, tbl, connector.Config{Topic: topic, OnDataLoss: policy, FlushInterval: 100 * time.Millisecond,
				Logger: quietLogger(), OnRecords: func(int64) {
					once.Do(func() {
						if err := e.Stack.Cluster.DeleteRecords(topic, 0, 300); err != nil {
							t.Error(err)
						}
					})
				}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(e.Ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := s.Run(ctx)
				done <- err
			}()
			tp := mapping.TopicPartition{Topic: topic, Partition: 0}
			if policy == connector.LossFail {
				select {
				case err := <-done:
					var loss *connector.DataLossError
					if !errors.As(err, &loss) || loss.Lost.High != 300 {
						t.Fatalf("err %v: want a data loss up to 300", err)
					}
				case <-time.After(15 * time.Second):
					t.Fatal("the idle sink did not notice that retention deleted offsets it had not sunk")
				}
				return
			}
			waitForNext(t, e, table, tp, 300)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			c := mapping.Cover(mustLedger(t, tbl).Ranges(tp))
			if len(c.Lost) != 1 || c.Lost[0].High != 300 || len(c.Gaps) > 0 || c.Next != 300 {
				t.Fatalf("coverage %+v: want one lost range up to 300 and no gap", c)
			}
		})
	}
}

// TestAbortedRecordsDeletedAreNotALoss: a sink stops at the last stable
// offset while a transaction is open, so the ledger can end where that
// transaction begins. When the transaction is aborted and retention then
// deletes into its records, only aborted records are gone: the sink used to
// fail with a data loss on every restart (or record a permanent lost
// range). The broker's aborted-transaction index and abort markers decide;
// a committed transaction, or a record of another producer inside the
// transaction's span, is still a loss.
func TestAbortedRecordsDeletedAreNotALoss(t *testing.T) {
	for _, c := range []struct {
		name        string
		commit      bool // the open transaction commits instead of aborting
		interleaved bool // another producer writes inside the transaction's span
		loss        bool
	}{
		{name: "aborted"},
		{name: "committed", commit: true, loss: true},
		{name: "interleaved", interleaved: true, loss: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			const topic = "txns"
			e.Topic(topic, 1, nil)
			e.Produce(records(topic, 0, 10, "a"))                      // offsets 0-9
			txn := openTxn(t, e, "open", records(topic, 0, 10, "txn")) // 10-19
			if c.interleaved {
				e.Produce(records(topic, 0, 3, "other")) // 20-22
			}
			tbl := e.Table("lake.txns")
			tp := mapping.TopicPartition{Topic: topic, Partition: 0}
			// The last stable offset holds the run at 10.
			if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
				t.Fatal(err)
			}
			if n := mustLedger(t, tbl).Next()[tp]; n != 10 {
				t.Fatalf("ledger next %d, want 10 (the open transaction's first offset)", n)
			}
			if err := txn.EndTransaction(e.Ctx, kgo.TransactionEndTry(c.commit)); err != nil {
				t.Fatal(err)
			}
			e.Produce(records(topic, 0, 5, "b"))
			if err := e.Stack.Cluster.DeleteRecords(topic, 0, 15); err != nil {
				t.Fatal(err)
			}
			_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
			if c.loss {
				var loss *connector.DataLossError
				if !errors.As(err, &loss) || loss.Lost != (mapping.Interval{Low: 10, High: 15}) {
					t.Fatalf("err %v: want a data loss of [10, 15)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("only aborted records were deleted, yet: %v", err)
			}
			end := e.endOffsets(topic)[tp]
			cov := mapping.Cover(mustLedger(t, tbl).Ranges(tp))
			if cov.Next != end || len(cov.Gaps) > 0 || len(cov.Lost) > 0 || cov.Records != 15 ||
				len(cov.Aborted) != 1 || cov.Aborted[0] != (mapping.Interval{Low: 10, High: 15}) {
				t.Fatalf("coverage %+v: want [0, %d) with 15 records, [10, 15) recorded as aborted, no gap and no loss", cov, end)
			}
			checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{tp: end})
		})
	}
}

// TestLiveSinkWaitsForOpenTransaction: retention deletes into a
// transaction that is still open while a live sink waits at its first
// offset. Whether a loss happened is known only when the transaction ends:
// the sink must not declare one meanwhile, and once the transaction is
// aborted, it goes on without a lost range.
func TestLiveSinkWaitsForOpenTransaction(t *testing.T) {
	e := newEnv(t)
	const topic, table = "waiting", "lake.waiting"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	txn := openTxn(t, e, "slow", records(topic, 0, 10, "txn"))
	tbl := e.Table(table)
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	stop := e.runLive(tbl, connector.Config{Topic: topic, OnDataLoss: connector.LossRecord, FlushInterval: 100 * time.Millisecond})
	waitForNext(t, e, table, tp, 10)
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 15); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // two retention checks
	if err := txn.EndTransaction(e.Ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 5, "b"))
	end := e.endOffsets(topic)[tp]
	waitForNext(t, e, table, tp, end)
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	cov := mapping.Cover(mustLedger(t, tbl).Ranges(tp))
	if len(cov.Lost) > 0 || len(cov.Gaps) > 0 || cov.Records != 15 {
		t.Fatalf("coverage %+v: want no lost range (only aborted records were deleted) and 15 records", cov)
	}
}
