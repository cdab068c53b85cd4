package connector_test

import (
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func TestSinkExactlyOnceWithTransactions(t *testing.T) {
	e := newEnv(t)
	const topic = "events"
	// Partition 0 ends in more data, the others end in the abort marker.
	committed := e.MixedLog(topic, floetest.MixedLog{Partitions: 4, Records: 300, Committed: 20, Aborted: 15, Trailing: 50})

	tbl := e.Table("lake.events")
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 200})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != int64(committed) {
		t.Fatalf("sink reports %d rows, want %d", stats.Records, committed)
	}
	ends := e.endOffsets(topic)
	rs := checkExactlyOnce(t, tbl, ends)
	if len(rs) != committed {
		t.Fatalf("table has %d rows, want %d", len(rs), committed)
	}
	var nullKeys, nullValues int
	for _, r := range rs {
		if strings.HasPrefix(r.Value, "aborted") {
			t.Fatalf("aborted record in table: %+v", r)
		}
		if r.KeyNil {
			nullKeys++
		}
		if r.ValNil {
			nullValues++
		}
	}
	if nullKeys == 0 || nullValues == 0 {
		t.Fatalf("null keys %d, null values %d: want both kept as nulls", nullKeys, nullValues)
	}
	// The ledger reaches the end offset even where the log ends in a marker.
	for tp, end := range ends {
		if stats.Next[tp] != end {
			t.Fatalf("%s: next %d, end %d", tp, stats.Next[tp], end)
		}
	}
	// Every data file holds one partition only.
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !f.HasBounds || f.PartitionMin != f.PartitionMax {
			t.Fatalf("file %s mixes partitions %d..%d", f.Path, f.PartitionMin, f.PartitionMax)
		}
	}
}

func TestSinkResumesExactly(t *testing.T) {
	e := newEnv(t)
	const topic = "resume"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 100, "a"))
	e.Produce(records(topic, 1, 80, "a"))
	tbl := e.Table("lake.resume")
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 30, "b"))
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != 30 || stats.Commits != 1 {
		t.Fatalf("second run: %d rows in %d commits, want 30 in 1", stats.Records, stats.Commits)
	}
	// A third run with nothing new commits nothing.
	stats, err = e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
	if err != nil || stats.Commits != 0 {
		t.Fatalf("idle run: %d commits, err %v; want none", stats.Commits, err)
	}
	if rs := checkExactlyOnce(t, tbl, e.endOffsets(topic)); len(rs) != 210 {
		t.Fatalf("%d rows, want 210", len(rs))
	}
}

func TestSinkRetentionLoss(t *testing.T) {
	e := newEnv(t)
	const topic = "retained"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	tbl := e.Table("lake.retained")
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 100, "b"))
	// Retention deletes offsets [100, 150) before they were sunk.
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 150); err != nil {
		t.Fatal(err)
	}
	before := len(rows(t, tbl))
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
	var loss *connector.DataLossError
	if !errors.As(err, &loss) || loss.Lost != (mapping.Interval{Low: 100, High: 150}) {
		t.Fatalf("default run: err %v, want a data loss of [100, 150)", err)
	}
	if !strings.Contains(err.Error(), "nothing after offset 100 was committed") {
		t.Fatalf("error does not say what was committed: %v", err)
	}
	if after := len(rows(t, tbl)); after != before {
		t.Fatalf("failed run changed the table: %d rows, was %d", after, before)
	}
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, OnDataLoss: connector.LossRecord})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != 50 {
		t.Fatalf("record run: %d rows, want 50", stats.Records)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	c := mapping.Cover(l.Ranges(mapping.TopicPartition{Topic: topic, Partition: 0}))
	if len(c.Lost) != 1 || c.Lost[0] != (mapping.Interval{Low: 100, High: 150}) || c.Next != 200 || len(c.Gaps) != 0 {
		t.Fatalf("ledger coverage %+v: want lost [100, 150) and next 200", c)
	}
}

// TestTwoSinksOneTable runs two sinks on the same table and partitions at
// once: both finish, every offset lands exactly once, the loser of a
// commit race reports that it was fenced, and each reports the table's
// next offsets, not positions of its own that a fence discarded.
func TestTwoSinksOneTable(t *testing.T) {
	e := newEnv(t)
	const topic = "contended"
	e.Topic(topic, 4, nil)
	for p := range int32(4) {
		e.Produce(records(topic, p, 3000, "a"))
	}
	a, b := e.Table("lake.contended"), e.Table("lake.contended")
	type result struct {
		stats connector.Stats
		err   error
	}
	results := make(chan result, 2)
	var logs floetest.SyncBuffer
	for _, tbl := range []*snapshot.Table{a, b} {
		go func() {
			st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 400, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			results <- result{st, err}
		}()
	}
	var fenced int
	var rowsSunk int64
	var nexts []map[mapping.TopicPartition]int64
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		fenced += r.stats.Fenced
		rowsSunk += r.stats.Records
		nexts = append(nexts, r.stats.Next)
	}
	if err := a.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := a.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, next := range nexts {
		if !maps.Equal(next, l.Next()) {
			t.Errorf("a sink reports next offsets %v, the table's are %v", next, l.Next())
		}
	}
	if fenced == 0 {
		t.Fatal("neither sink reports being fenced")
	}
	// The warning names the way out of two sinks of one topic (from a
	// new-user run).
	if !strings.Contains(logs.String(), "run one, or several with --group") {
		t.Errorf("the fenced sink's warning does not name --group:\n%s", logs.String())
	}
	if rowsSunk != 12000 {
		t.Fatalf("the sinks committed %d rows together, want 12000", rowsSunk)
	}
	if rs := checkExactlyOnce(t, a, e.endOffsets(topic)); len(rs) != 12000 {
		t.Fatalf("%d rows, want 12000", len(rs))
	}
}

// TestTwoLiveSinksStartLatest runs two live sinks with --start latest on the
// same table and partitions: one of them records the partitions' starts,
// the other resumes from them (or is fenced and then does), and every
// record produced after the starts lands exactly once.
func TestTwoLiveSinksStartLatest(t *testing.T) {
	e := newEnv(t)
	const topic, table = "contended-latest", "lake.contended_latest"
	e.Topic(topic, 4, nil)
	for p := range int32(4) {
		e.Produce(records(topic, p, 500, "before"))
	}
	cfg := connector.Config{Topic: topic, Start: connector.StartLatest, FlushRecords: 400, FlushInterval: 200 * time.Millisecond}
	stopA := e.runLive(e.Table(table), cfg)
	stopB := e.runLive(e.Table(table), cfg)
	for p := range int32(4) {
		waitForNext(t, e, table, mapping.TopicPartition{Topic: topic, Partition: p}, 500)
	}
	for p := range int32(4) {
		e.Produce(records(topic, p, 3000, "after"))
	}
	end := e.endOffsets(topic)
	for tp, n := range end {
		waitForNext(t, e, table, tp, n)
	}
	for _, stop := range []func() (connector.Stats, error){stopA, stopB} {
		if _, err := stop(); err != nil {
			t.Fatal(err)
		}
	}
	if rs := checkExactlyOnce(t, e.Table(table), end); len(rs) != 12000 {
		t.Fatalf("%d rows, want the 12000 produced after the start", len(rs))
	}
}

// TestSinkPartitionsNextOffsets: a run restricted to some partitions
// reports the next offsets of those only; the others are another
// process's, and read as if nothing was sunk there (from a new user).
func TestSinkPartitionsNextOffsets(t *testing.T) {
	e := newEnv(t)
	const topic = "split"
	e.Topic(topic, 2, nil)
	for p := range int32(2) {
		e.Produce(floetest.Records(topic, p, 5, "r"))
	}
	tbl := e.Table("lake.split")
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, Partitions: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, Partitions: []int32{1}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[mapping.TopicPartition]int64{{Topic: topic, Partition: 1}: 5}; !maps.Equal(stats.Next, want) {
		t.Fatalf("next offsets %v, want %v", stats.Next, want)
	}
}
