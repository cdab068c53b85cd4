package floetest

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Row is one table row's identity and content.
type Row struct {
	TP     mapping.TopicPartition
	Offset int64
	Key    string
	KeyNil bool
	Value  string
	ValNil bool
	TS     int64
}

// Rows scans every row of the table's branch head, after reloading it.
func Rows(t testing.TB, tbl *snapshot.Table) []Row {
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
	var out []Row
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
			out = append(out, Row{
				TP:     mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)},
				Offset: off.Value(i),
				Key:    string(key.Value(i)), KeyNil: key.IsNull(i),
				Value: string(val.Value(i)), ValNil: val.IsNull(i),
				TS: int64(ts.Value(i)),
			})
		}
		b.Release()
	}
	return out
}

// CheckExactlyOnce asserts that rows are unique per (partition, offset),
// that the ledger of every partition is contiguous from first to want[tp],
// and that each range's record count matches the rows inside it. It is the
// oracle of every sink and replay test, so there is one of it.
func CheckExactlyOnce(t testing.TB, tbl *snapshot.Table, want map[mapping.TopicPartition]int64) []Row {
	t.Helper()
	rs := Rows(t, tbl)
	seen := map[mapping.TopicPartition]map[int64]bool{}
	for _, r := range rs {
		if seen[r.TP] == nil {
			seen[r.TP] = map[int64]bool{}
		}
		if seen[r.TP][r.Offset] {
			t.Fatalf("duplicate row %s@%d", r.TP, r.Offset)
		}
		seen[r.TP][r.Offset] = true
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

// HighWatermarks returns the high watermark of every partition of topic,
// asked over a connection of its own (Dial), so that no client's cached
// metadata hides a partition added since.
func (e *Env) HighWatermarks(topic string) map[mapping.TopicPartition]int64 {
	e.T.Helper()
	wm, err := e.Dial().Watermarks(e.Ctx, topic)
	if err != nil {
		e.T.Fatal(err)
	}
	out := map[mapping.TopicPartition]int64{}
	for p, w := range wm {
		out[mapping.TopicPartition{Topic: topic, Partition: p}] = w.HighWatermark
	}
	return out
}
