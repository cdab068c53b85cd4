package connector_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// produceOneByOne writes records in separate batches, so that a consumer
// limited to one batch per fetch advances record by record.
func (e *env) produceOneByOne(recs []*kgo.Record) {
	e.T.Helper()
	for _, r := range recs {
		e.Produce([]*kgo.Record{r})
	}
}

// TestBoundedRunRetentionPastEnd: retention moves the log start past a
// bounded run's end offset while the run is reading. The deleted offsets
// must be reported as lost, never committed as an empty range.
func TestBoundedRunRetentionPastEnd(t *testing.T) {
	for _, policy := range []connector.OnDataLoss{connector.LossFail, connector.LossRecord} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t)
			const topic = "shrinking"
			e.Topic(topic, 1, nil)
			e.produceOneByOne(records(topic, 0, 80, "a"))
			tbl := e.Table("lake.shrinking")
			slow, err := connector.Dial(e.Ctx, e.Stack.Brokers, 5*time.Second, kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1))
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			var once sync.Once
			s, err := connector.NewSink(slow, tbl, connector.Config{Topic: topic, StopAtEnd: true, OnDataLoss: policy, Logger: quietLogger(),
				OnRecords: func(int64) {
					once.Do(func() {
						// The end was fixed at 80 when the run started.
						e.produceOneByOne(records(topic, 0, 20, "b"))
						if err := e.Stack.Cluster.DeleteRecords(topic, 0, 90); err != nil {
							t.Error(err)
						}
					})
				}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Run(e.Ctx)
			tp := mapping.TopicPartition{Topic: topic, Partition: 0}
			l := mustLedger(t, tbl)
			c := mapping.Cover(l.Ranges(tp))
			if policy == connector.LossFail {
				var loss *connector.DataLossError
				if !errors.As(err, &loss) || loss.Lost.High != 80 || loss.Lost.Low >= 80 {
					t.Fatalf("err %v: want a data loss ending at the run's end 80", err)
				}
				if c.Ranges > 0 && c.Next > loss.Lost.Low {
					t.Fatalf("ledger reaches %d, past the loss at %d", c.Next, loss.Lost.Low)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if c.Next != 80 || len(c.Gaps) > 0 || len(c.Lost) != 1 || c.Lost[0].High != 80 {
					t.Fatalf("coverage %+v: want the loss recorded up to the end 80", c)
				}
			}
			checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{tp: c.Next})
		})
	}
}

// TestLiveSinkPicksUpNewPartitions: partitions added to the topic while a
// live sink runs are sunk too.
func TestLiveSinkPicksUpNewPartitions(t *testing.T) {
	e := newEnv(t)
	const topic = "growing"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 50, "a"))
	e.Produce(records(topic, 1, 50, "a"))
	tbl := e.Table("lake.growing")
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, FlushInterval: 100 * time.Millisecond,
		PartitionCheck: 100 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx)
		done <- err
	}()
	if _, err := kadm.NewClient(e.Dial().Client()).CreatePartitions(e.Ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 2, 30, "new"))
	want := e.endOffsets(topic)
	waitForNext(t, e, "lake.growing", mapping.TopicPartition{Topic: topic, Partition: 2}, 30)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rs := checkExactlyOnce(t, tbl, want); len(rs) != 130 {
		t.Fatalf("%d rows, want 130", len(rs))
	}
}

// TestSinkRefusesRecreatedTopic: a ledger past the end of the partition
// means the topic was recreated; resuming would skip its new records.
func TestSinkRefusesRecreatedTopic(t *testing.T) {
	e := newEnv(t)
	const topic = "reborn"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	tbl := e.Table("lake.reborn")
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.Stack.Cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "b"))
	before := len(mustLedger(t, tbl).Commits)
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
	if err == nil || !strings.Contains(err.Error(), "recreated") {
		t.Fatalf("err %v: want a refusal naming a recreated topic", err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if after := len(mustLedger(t, tbl).Commits); after != before {
		t.Fatalf("commits %d -> %d", before, after)
	}
}

// waitForNext polls the table, through its own handle (the sink's is not
// for sharing), until the ledger's next offset of tp reaches want.
func waitForNext(t *testing.T, e *env, table string, tp mapping.TopicPartition, want int64) {
	t.Helper()
	reader := e.Table(table)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := reader.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		next := mustLedger(t, reader).Next()
		if next[tp] >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach %d: ledger next %v", tp, want, next)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLiveSinkNewPartitionOnBusyTopic: a partition added while another one
// is busy (polls never come back empty) is still found, and with
// --start latest it is sunk from its first record: all of it is new.
func TestLiveSinkNewPartitionOnBusyTopic(t *testing.T) {
	e := newEnv(t)
	const topic = "busy"
	e.Topic(topic, 1, nil)
	tbl := e.Table("lake.busy")
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, Start: connector.StartLatest,
		FlushRecords: 20, FlushInterval: 100 * time.Millisecond, PartitionCheck: 200 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx)
		done <- err
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if err := localstackProduce(e, records(topic, 0, 1, fmt.Sprintf("busy%d", i))); err != nil {
				return
			}
		}
	}()
	waitForNext(t, e, "lake.busy", mapping.TopicPartition{Topic: topic, Partition: 0}, 1)
	if _, err := kadm.NewClient(e.Dial().Client()).CreatePartitions(e.Ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 1, 30, "new"))
	waitForNext(t, e, "lake.busy", mapping.TopicPartition{Topic: topic, Partition: 1}, 30)
	close(stop)
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rs := rows(t, e.Table("lake.busy"))
	var fromNew int
	for _, r := range rs {
		if r.TP.Partition == 1 {
			fromNew++
		}
	}
	if fromNew != 30 {
		t.Fatalf("%d rows of the new partition, want all 30", fromNew)
	}
}

// TestBoundedRunRetentionWhileOtherPartitionBusy: retention deletes the rest
// of one partition's range while another partition keeps receiving records;
// the bounded run still ends, with the loss recorded.
func TestBoundedRunRetentionWhileOtherPartitionBusy(t *testing.T) {
	e := newEnv(t)
	const topic = "hot"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 20, "a"))
	e.produceOneByOne(records(topic, 1, 15, "a"))
	tbl := e.Table("lake.hot")
	slow, err := connector.Dial(e.Ctx, e.Stack.Brokers, 5*time.Second, kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	var once sync.Once
	s, err := connector.NewSink(slow, tbl, connector.Config{Topic: topic, StopAtEnd: true, OnDataLoss: connector.LossRecord, Logger: quietLogger(),
		OnRecords: func(int64) {
			once.Do(func() {
				if err := e.Stack.Cluster.DeleteRecords(topic, 1, 15); err != nil {
					t.Error(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						case <-time.After(time.Millisecond):
						}
						if localstackProduce(e, records(topic, 0, 1, "more")) != nil {
							return
						}
					}
				}()
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, 30*time.Second)
	defer cancel()
	if _, err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the bounded run did not end")
	}
	c := mapping.Cover(mustLedger(t, tbl).Ranges(mapping.TopicPartition{Topic: topic, Partition: 1}))
	if c.Next != 15 || len(c.Lost) != 1 || c.Lost[0].High != 15 {
		t.Fatalf("partition 1 coverage %+v: want the loss recorded up to 15", c)
	}
}

// localstackProduce produces without failing the test, for goroutines.
func localstackProduce(e *env, recs []*kgo.Record) error {
	return localstack.Produce(e.Ctx, e.Stack.Brokers, recs)
}

// TestBoundedRunTrailingRetentionKeepsRecordsInHand: retention deletes
// offsets the client has already fetched while the run is slow; those
// records were read, so they are sunk, not declared lost.
func TestBoundedRunTrailingRetentionKeepsRecordsInHand(t *testing.T) {
	e := newEnv(t)
	const topic = "trailing"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	tbl := e.Table("lake.trailing")
	var once sync.Once
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 10,
		OnRecords: func(int64) {
			once.Do(func() {
				time.Sleep(2100 * time.Millisecond) // past the retention check's period
				if err := e.Stack.Cluster.DeleteRecords(topic, 0, 50); err != nil {
					t.Error(err)
				}
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != 100 {
		t.Fatalf("%d rows, want all 100 the client had fetched", stats.Records)
	}
	c := mapping.Cover(mustLedger(t, tbl).Ranges(mapping.TopicPartition{Topic: topic, Partition: 0}))
	if len(c.Lost) != 0 || c.Next != 100 {
		t.Fatalf("coverage %+v: want [0, 100) with no loss", c)
	}
}

// TestBoundedRunEndBelowLedger: a bounded run whose end lies below where
// the ledger already is has nothing to do, even when retention has since
// moved the log start past the ledger.
func TestBoundedRunEndBelowLedger(t *testing.T) {
	for _, policy := range []connector.OnDataLoss{connector.LossFail, connector.LossRecord} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t)
			const topic = "behind"
			e.Topic(topic, 1, nil)
			e.Produce(records(topic, 0, 100, "a"))
			tbl := e.Table("lake.behind")
			if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
				t.Fatal(err)
			}
			e.Produce(records(topic, 0, 30, "b"))
			if err := e.Stack.Cluster.DeleteRecords(topic, 0, 120); err != nil {
				t.Fatal(err)
			}
			stats, err := e.sink(tbl, connector.Config{Topic: topic, EndOffsets: map[int32]int64{0: 50}, OnDataLoss: policy})
			if err != nil || stats.Commits != 0 {
				t.Fatalf("err %v, %d commits: want nothing to do", err, stats.Commits)
			}
		})
	}
}
