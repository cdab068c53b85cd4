package connector_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// produceOneByOne writes records in separate batches, so that a consumer
// limited to one batch per fetch advances record by record.
func (e *env) produceOneByOne(recs []*kgo.Record) {
	e.t.Helper()
	for _, r := range recs {
		e.produce([]*kgo.Record{r})
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
			e.topic(topic, 1, nil)
			e.produceOneByOne(records(topic, 0, 80, "a"))
			tbl := e.table("lake.shrinking")
			slow, err := connector.Dial(e.ctx, e.stack.Brokers, 5*time.Second, kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1))
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
						if err := e.stack.Cluster.DeleteRecords(topic, 0, 90); err != nil {
							t.Error(err)
						}
					})
				}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Run(e.ctx)
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
	e.topic(topic, 2, nil)
	e.produce(records(topic, 0, 50, "a"))
	e.produce(records(topic, 1, 50, "a"))
	tbl := e.table("lake.growing")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	s, err := connector.NewSink(e.broker(), tbl, connector.Config{Topic: topic, FlushInterval: 100 * time.Millisecond,
		PartitionCheck: 100 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx)
		done <- err
	}()
	if _, err := kadm.NewClient(e.broker().Client()).CreatePartitions(e.ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	e.produce(records(topic, 2, 30, "new"))
	want := e.endOffsets(topic)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := tbl.Refresh(e.ctx); err != nil {
			t.Fatal(err)
		}
		next := mustLedger(t, tbl).Next()
		if next[mapping.TopicPartition{Topic: topic, Partition: 2}] == 30 && len(next) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new partition was not sunk: ledger next %v", next)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
	e.topic(topic, 1, nil)
	e.produce(records(topic, 0, 50, "a"))
	tbl := e.table("lake.reborn")
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.stack.Cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	e.topic(topic, 1, nil)
	e.produce(records(topic, 0, 10, "b"))
	before := len(mustLedger(t, tbl).Commits)
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
	if err == nil || !strings.Contains(err.Error(), "recreated") {
		t.Fatalf("err %v: want a refusal naming a recreated topic", err)
	}
	if err := tbl.Refresh(e.ctx); err != nil {
		t.Fatal(err)
	}
	if after := len(mustLedger(t, tbl).Commits); after != before {
		t.Fatalf("commits %d -> %d", before, after)
	}
}

// TestSinkMirrorsGroupOffsets: with a group, each commit's next offsets
// reach the consumer group for lag tooling.
func TestSinkMirrorsGroupOffsets(t *testing.T) {
	e := newEnv(t)
	const topic, group = "lagged", "floe-lake-lagged"
	e.topic(topic, 2, nil)
	e.produce(records(topic, 0, 40, "a"))
	e.produce(records(topic, 1, 25, "a"))
	tbl := e.table("lake.lagged")
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, Group: group}); err != nil {
		t.Fatal(err)
	}
	resp, err := kadm.NewClient(e.broker().Client()).FetchOffsets(e.ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	for tp, end := range e.endOffsets(topic) {
		o, ok := resp.Lookup(topic, tp.Partition)
		if !ok || o.Err != nil || o.At != end {
			t.Fatalf("%s: group offset %+v, want %d", tp, o, end)
		}
	}
}
