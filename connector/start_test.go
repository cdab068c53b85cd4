package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestStartLatestPartitionAddedWhileDown: a table sinks a topic with --start
// latest. While the sink is stopped (a deploy, a bounded job between two
// runs), the topic grows a partition and producers write to it. Every record
// of that partition was written after the table began the topic, like a
// partition added while the sink runs: the next run sinks it from offset 0.
// (It used to evaluate --start latest for it and skip everything, with a
// start recorded at the last stable offset and a complete audit.)
func TestStartLatestPartitionAddedWhileDown(t *testing.T) {
	e := newEnv(t)
	const topic, table = "grown-latest", "lake.grown_latest"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 20, "before"))
	tbl := e.Table(table)
	cfg := connector.Config{Topic: topic, Start: connector.StartLatest, StopAtEnd: true}
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 10, "after")) // 20-29: sunk by the next run
	// While the sink is down, the topic grows a partition that gets data.
	if _, err := kadm.NewClient(e.Dial().Client()).CreatePartitions(e.Ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 1, 30, "new"))
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	p1 := mapping.TopicPartition{Topic: topic, Partition: 1}
	got := offsetsOf(t, tbl, p1)
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 30 {
		t.Fatalf("partition 1, added after the table began the topic, has %d rows (want offsets 0-29, all written after the table's start): "+
			"--start latest was applied to it and skipped them; the audit reports complete=%v with notes %q",
			len(got), rep.Complete(), rep.Notes)
	}
}

// cancelOn is a log handler that cancels a context when a message
// containing msg is logged: a deterministic way to interrupt the sink at
// one point of its run.
type cancelOn struct {
	msg    string
	cancel context.CancelFunc
}

func (h cancelOn) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOn) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		h.cancel()
	}
	return nil
}
func (h cancelOn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h cancelOn) WithGroup(string) slog.Handler      { return h }

// TestInterruptDuringStartCommit: SIGINT (ctx cancelled) arrives while the
// sink makes the start commit that records where new partitions begin, the
// first thing every first run of a table does. The README promises exit 0 on
// SIGINT: the start commit completes (like a flush, it is not cut short) and
// Run returns nil.
func TestInterruptDuringStartCommit(t *testing.T) {
	e := newEnv(t)
	const topic = "interrupted-start"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	// The head of the log is gone, so the sink logs a warning right before
	// its start commit: that is where the interrupt lands.
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 5); err != nil {
		t.Fatal(err)
	}
	tbl := e.Table("lake.interrupted_start")
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic,
		Logger: slog.New(cancelOn{msg: "log starts above offset 0", cancel: cancel})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx); err != nil {
		t.Fatalf("interrupted during the start commit, Run returned %v; want nil (an interrupt exits 0)", err)
	}
}

// TestStartLatestV1LedgerUpgrade: a table written by a floe before start
// ranges (ledger version 1) with --start latest, where partition 1 got no
// record while that floe ran, so its start lived only in memory. Producers
// then write to partition 1; the new floe resumes the table and must sink
// partition 1 from offset 0 (the table began the topic before those records
// were written), not evaluate --start latest again.
func TestStartLatestV1LedgerUpgrade(t *testing.T) {
	e := newEnv(t)
	const topic, table = "upgraded", "lake.upgraded"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 20, "old")) // 0-19, before the old sink started
	e.Produce(records(topic, 0, 5, "sunk")) // 20-24, sunk by the old floe
	tbl := e.Table(table)
	p0 := mapping.TopicPartition{Topic: topic, Partition: 0}
	v1Commit(t, tbl, p0, 20, 25)
	e.Produce(records(topic, 1, 12, "later")) // partition 1: written after the table began the topic
	if _, err := e.sink(tbl, connector.Config{Topic: topic, Start: connector.StartLatest, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	p1 := mapping.TopicPartition{Topic: topic, Partition: 1}
	if got := offsetsOf(t, tbl, p1); len(got) != 12 {
		t.Fatalf("partition 1 has rows at %v, want offsets 0-11 (written after the table began the topic with --start latest); ledger coverage %+v",
			got, mapping.Cover(mustLedger(t, tbl).Ranges(p1)))
	}
}

// v1Commit commits rows [low, high) of tp with a ledger entry in the
// encoding of a floe before start ranges and topic IDs (floe.version 1).
func v1Commit(t *testing.T, tbl *snapshot.Table, tp mapping.TopicPartition, low, high int64) {
	t.Helper()
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for o := low; o < high; o++ {
		rb.Append(&kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: o, Value: []byte("v1"), Timestamp: time.UnixMilli(1_700_000_000_000 + o)})
	}
	rows := rb.NewBatch()
	props := iceberg.Properties{
		mapping.KeyVersion:                 "1",
		mapping.KeyCommitID:                uuid.NewString(),
		mapping.KeyWriter:                  "floe-v1",
		mapping.KeyRangesPrefix + tp.Topic: fmt.Sprintf("%d:%d-%d:%d", tp.Partition, low, high, high-low),
	}
	ice := tbl.Iceberg()
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(rows, nil) }
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(t.Context(), ice, tbl.ArrowSchema(), one) {
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, df)
	}
	txn := ice.NewTransaction()
	if err := txn.AddDataFiles(t.Context(), files, props); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
}
