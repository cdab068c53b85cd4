package floetest

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
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
	// Columns holds the other columns of typed tables and dead-letter
	// tables (value columns, error, schema_id), as Arrow prints them
	// (ValueStr: JSON for structs and lists, "(null)" for null).
	Columns map[string]string
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
		ts := b.Column(idx(mapping.ColTimestamp)).(*array.Timestamp)
		// The raw value: value in a raw table, kafka_value beside typed
		// columns (or none).
		var val *array.Binary
		for _, name := range []string{mapping.ColRawValue, mapping.ColValue} {
			if i := b.Schema().FieldIndices(name); len(i) == 1 && val == nil {
				val, _ = b.Column(i[0]).(*array.Binary)
			}
		}
		for i := range int(b.NumRows()) {
			r := Row{
				TP:     mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)},
				Offset: off.Value(i),
				TS:     int64(ts.Value(i)),
				ValNil: true,
			}
			if val != nil {
				r.Value, r.ValNil = string(val.Value(i)), val.IsNull(i)
			}
			for c, f := range b.Schema().Fields() {
				col := b.Column(c)
				switch f.Name {
				case mapping.ColTopic, mapping.ColPartition, mapping.ColOffset, mapping.ColTimestamp, mapping.ColHeaders:
				case mapping.ColKey:
					r.KeyNil = col.IsNull(i)
					if k, ok := col.(*array.Binary); ok {
						r.Key = string(k.Value(i))
					} else if !r.KeyNil {
						r.Key = col.ValueStr(i)
					}
				default:
					if val != nil && col == arrow.Array(val) {
						continue
					}
					if r.Columns == nil {
						r.Columns = map[string]string{}
					}
					r.Columns[f.Name] = col.ValueStr(i)
				}
			}
			out = append(out, r)
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
	rows, _ := CheckWithDeadLetters(t, tbl, nil, want)
	return rows
}

// CheckWithDeadLetters is CheckExactlyOnce for a table with a dead-letter
// table (nil: none): every offset is a row of tbl or a dead letter of dlq,
// never both, and each range's DeadLetters matches the dead letters inside
// it. It returns the rows and the dead letters.
func CheckWithDeadLetters(t testing.TB, tbl, dlq *snapshot.Table, want map[mapping.TopicPartition]int64) (rows, dead []Row) {
	t.Helper()
	rows = Rows(t, tbl)
	if dlq != nil {
		dead = Rows(t, dlq)
	}
	seen := map[mapping.TopicPartition]map[int64]bool{}
	deadAt := map[mapping.TopicPartition]map[int64]bool{}
	for _, r := range rows {
		if seen[r.TP] == nil {
			seen[r.TP] = map[int64]bool{}
		}
		if seen[r.TP][r.Offset] {
			t.Fatalf("duplicate row %s@%d", r.TP, r.Offset)
		}
		seen[r.TP][r.Offset] = true
	}
	for _, r := range dead {
		if deadAt[r.TP] == nil {
			deadAt[r.TP] = map[int64]bool{}
		}
		if deadAt[r.TP][r.Offset] {
			t.Fatalf("duplicate dead letter %s@%d", r.TP, r.Offset)
		}
		if seen[r.TP][r.Offset] {
			t.Fatalf("%s@%d is both a row and a dead letter", r.TP, r.Offset)
		}
		deadAt[r.TP][r.Offset] = true
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	count := func(in map[int64]bool, r mapping.Range) (n int64) {
		for o := range in {
			if r.Contains(o) {
				n++
			}
		}
		return n
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
			if n := count(seen[tp], r); n != r.Records {
				t.Fatalf("%s: range %s records %d, rows in it %d", tp, r.Interval, r.Records, n)
			}
			if n := count(deadAt[tp], r); n != r.DeadLetters {
				t.Fatalf("%s: range %s dead letters %d, dead letters in it %d", tp, r.Interval, r.DeadLetters, n)
			}
		}
		for _, in := range []map[int64]bool{seen[tp], deadAt[tp]} {
			for o := range in {
				if !slices.ContainsFunc(rgs, func(r mapping.Range) bool { return r.Contains(o) }) {
					t.Fatalf("%s: row or dead letter at offset %d outside the ledger", tp, o)
				}
			}
		}
	}
	return rows, dead
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
