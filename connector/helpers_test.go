package connector_test

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// env is one test's stack: floetest.Env (a kfake broker over TCP, a SQLite
// catalog and a file warehouse) with this package's helpers.
type env struct {
	*floetest.Env
}

func newEnv(t testing.TB) *env { return &env{floetest.New(t)} }

// broker returns a new broker connection on every call.
func (e *env) broker() *connector.Broker {
	e.T.Helper()
	return e.Env.Dial()
}

func quietLogger() *slog.Logger { return floetest.QuietLogger() }

// sink runs a sink of cfg.Topic into tbl, over a broker connection of its
// own, and returns its stats.
func (e *env) sink(tbl *snapshot.Table, cfg connector.Config) (connector.Stats, error) {
	e.T.Helper()
	return e.Env.Sink(e.broker(), tbl, cfg)
}

// records is floetest.Records.
func records(topic string, partition int32, n int, tag string) []*kgo.Record {
	return floetest.Records(topic, partition, n, tag)
}

// row is one table row's identity and content.
type row struct {
	tp     mapping.TopicPartition
	offset int64
	key    string
	keyNil bool
	value  string
	valNil bool
	ts     int64
}

// rows scans every row of the table's branch head.
func rows(t testing.TB, tbl *snapshot.Table) []row {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tbl.Head() == nil {
		return nil
	}
	scan := tbl.Iceberg().Scan(table.WithSnapshotID(tbl.Head().SnapshotID))
	_, it, err := scan.ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		idx := func(name string) int { return b.Schema().FieldIndices(name)[0] }
		topic := b.Column(idx(mapping.ColTopic)).(*array.String)
		part := b.Column(idx(mapping.ColPartition)).(*array.Int32)
		off := b.Column(idx(mapping.ColOffset)).(*array.Int64)
		key := b.Column(idx(mapping.ColKey)).(*array.Binary)
		val := b.Column(idx(mapping.ColValue)).(*array.Binary)
		ts := b.Column(idx(mapping.ColTimestamp)).(*array.Timestamp)
		for i := range int(b.NumRows()) {
			out = append(out, row{
				tp:     mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)},
				offset: off.Value(i),
				key:    string(key.Value(i)), keyNil: key.IsNull(i),
				value: string(val.Value(i)), valNil: val.IsNull(i),
				ts: int64(ts.Value(i)),
			})
		}
		b.Release()
	}
	return out
}

// checkExactlyOnce asserts that rows are unique per (partition, offset),
// that the ledger of every partition is contiguous from first to want[tp],
// and that each range's record count matches the rows inside it.
func checkExactlyOnce(t testing.TB, tbl *snapshot.Table, want map[mapping.TopicPartition]int64) []row {
	t.Helper()
	rs := rows(t, tbl)
	seen := map[mapping.TopicPartition]map[int64]bool{}
	for _, r := range rs {
		if seen[r.tp] == nil {
			seen[r.tp] = map[int64]bool{}
		}
		if seen[r.tp][r.offset] {
			t.Fatalf("duplicate row %s@%d", r.tp, r.offset)
		}
		seen[r.tp][r.offset] = true
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for tp, next := range want {
		rgs := l.Ranges(tp)
		c := mapping.Cover(rgs)
		// A partition starts at 0, or where the ledger records that a sink
		// started it (--start latest).
		if len(c.Gaps) > 0 || len(c.Overlaps) > 0 || c.Next != next || (len(rgs) > 0 && c.First != 0 && !c.Started) {
			t.Fatalf("%s: ledger first %d (started %v) next %d gaps %v overlaps %v; want contiguous up to %d from 0 or a recorded start", tp, c.First, c.Started, c.Next, c.Gaps, c.Overlaps, next)
		}
		for _, r := range rgs {
			var n int64
			for o := range seen[tp] {
				if r.Contains(o) {
					n++
				}
			}
			if n != r.Records {
				t.Fatalf("%s: range %s records %d, rows in it %d", tp, r.Interval, r.Records, n)
			}
		}
		for o := range seen[tp] {
			if !slices.ContainsFunc(rgs, func(r mapping.Range) bool { return r.Contains(o) }) {
				t.Fatalf("%s: row at offset %d outside the ledger", tp, o)
			}
		}
	}
	return rs
}

// endOffsets returns the high watermark of every partition of topic.
func (e *env) endOffsets(topic string) map[mapping.TopicPartition]int64 {
	e.T.Helper()
	wm, err := e.broker().Watermarks(e.Ctx, topic)
	if err != nil {
		e.T.Fatal(err)
	}
	out := map[mapping.TopicPartition]int64{}
	for p, w := range wm {
		out[mapping.TopicPartition{Topic: topic, Partition: p}] = w.HighWatermark
	}
	return out
}
