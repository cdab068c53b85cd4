package connector

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
)

var tp0 = mapping.TopicPartition{Topic: "t", Partition: 0}

func iv(lo, hi int64) mapping.Interval { return mapping.Interval{Low: lo, High: hi} }

// fetched is one record as a fetch returns it.
type fetched struct {
	offset   int64
	control  bool
	logStart int64
}

// TestObserve feeds records to a partition's accounting and checks every
// step, without a broker.
func TestObserve(t *testing.T) {
	type want struct {
		step     step
		advanced int64
		deleted  mapping.Interval
		next     int64
	}
	for _, c := range []struct {
		name     string
		pos, end int64
		skipped  mapping.Interval
		records  []fetched
		want     []want
	}{
		{
			name: "records and a marker", pos: 0, end: -1,
			records: []fetched{{0, false, 0}, {1, false, 0}, {2, true, 0}},
			want:    []want{{stepRow, 1, iv(0, 0), 1}, {stepRow, 1, iv(0, 0), 2}, {stepNoRow, 1, iv(0, 0), 3}},
		},
		{
			name: "aborted records jumped over inside the retained log", pos: 10, end: -1,
			records: []fetched{{15, true, 0}, {16, false, 0}},
			want:    []want{{stepNoRow, 6, iv(0, 0), 16}, {stepRow, 1, iv(0, 0), 17}},
		},
		{
			name: "a jump across the log start is a deletion to decide", pos: 10, end: -1,
			records: []fetched{{25, false, 20}},
			want:    []want{{stepDeleted, 0, iv(10, 20), 10}},
		},
		{
			name: "a deletion capped at the end of a bounded run", pos: 10, end: 15,
			records: []fetched{{25, false, 20}},
			want:    []want{{stepDeleted, 0, iv(10, 15), 10}},
		},
		{
			name: "a record past the end closes the run", pos: 10, end: 14,
			records: []fetched{{12, false, 0}, {20, false, 0}, {21, false, 0}},
			want:    []want{{stepRow, 3, iv(0, 0), 13}, {stepNoRow, 1, iv(0, 0), 14}, {stepDone, 0, iv(0, 0), 14}},
		},
		{
			name: "records fetched inside offsets declared deleted stay out", pos: 20, end: -1, skipped: iv(10, 20),
			records: []fetched{{12, false, 0}, {20, false, 20}},
			want:    []want{{stepStale, 0, iv(0, 0), 20}, {stepRow, 1, iv(0, 0), 21}},
		},
		{
			name: "the log went back", pos: 20, end: -1,
			records: []fetched{{5, false, 0}},
			want:    []want{{stepBack, 0, iv(0, 0), 20}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPartition(tp0, c.pos, c.end)
			p.skipped = c.skipped
			for i, r := range c.records {
				st, n, deleted := p.observe(r.offset, r.control, r.logStart)
				got := want{st, n, deleted, p.next}
				if got != c.want[i] {
					t.Fatalf("record %d (%+v): got %+v, want %+v", i, r, got, c.want[i])
				}
			}
		})
	}
}

// TestSkipCutsRangesAndRows: a flush holding rows, then a lost range, then
// more rows of the same partition gives three ranges and two batches, so
// that no data file spans the loss; the next flush starts where it ends.
func TestSkipCutsRangesAndRows(t *testing.T) {
	p := newPartition(tp0, 0, -1)
	sc, err := mapping.ArrowSchema(mapping.Schema())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), sc)
	if err != nil {
		t.Fatal(err)
	}
	p.rows = rb
	defer p.release()
	feed := func(from, to int64) {
		for o := from; o < to; o++ {
			if st, _, _ := p.observe(o, false, 0); st != stepRow {
				t.Fatalf("offset %d: step %d", o, st)
			}
			p.rows.Append(&kgo.Record{Topic: "t", Offset: o, Value: fmt.Appendf(nil, "v%d", o)})
		}
	}
	feed(0, 3)
	st, _, deleted := p.observe(7, false, 5)
	if st != stepDeleted || deleted != iv(3, 5) {
		t.Fatalf("step %d, deleted %v; want a deletion of [3, 5)", st, deleted)
	}
	p.skip(mapping.Range{TopicPartition: tp0, Interval: deleted, Lost: true})
	feed(5, 7)
	tk := p.take()
	ranges, groups := tk.ranges, tk.groups
	var batches []arrow.RecordBatch
	for _, g := range groups {
		batches = append(batches, g...)
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	wantRanges := []mapping.Range{
		{TopicPartition: tp0, Interval: iv(0, 3), Records: 3},
		{TopicPartition: tp0, Interval: iv(3, 5), Lost: true},
		{TopicPartition: tp0, Interval: iv(5, 7), Records: 2},
	}
	if !reflect.DeepEqual(ranges, wantRanges) {
		t.Fatalf("ranges %v, want %v", ranges, wantRanges)
	}
	if len(batches) != 2 || batches[0].NumRows() != 3 || batches[1].NumRows() != 2 {
		t.Fatalf("%d batches, want one of 3 rows and one of 2", len(batches))
	}
	if p.low != 7 || p.next != 7 || p.dirty() {
		t.Fatalf("after take: [%d, %d) dirty %v; want an empty range at 7", p.low, p.next, p.dirty())
	}
}

// TestStalledBehind: the retention check asks the broker about a partition
// only after a whole check period without progress, while the log starts
// past its position, and never about a done one.
func TestStalledBehind(t *testing.T) {
	p := newPartition(tp0, 10, -1)
	if p.stalledBehind(20) {
		t.Fatal("the first check saw no earlier position: not stalled yet")
	}
	if !p.stalledBehind(20) {
		t.Fatal("no progress over a check period with the log past next: stalled")
	}
	p.observe(10, false, 0)
	if p.stalledBehind(20) {
		t.Fatal("progress since the last check: not stalled")
	}
	if p.stalledBehind(11) {
		t.Fatal("the log starts at next: nothing was deleted")
	}
	done := newPartition(tp0, 10, 10)
	done.stalledBehind(20)
	if done.stalledBehind(20) {
		t.Fatal("a done partition is never stalled")
	}
}

// TestBegin: where a partition the ledger does not have begins.
func TestBegin(t *testing.T) {
	w := Watermarks{LogStart: 5, LastStable: 40, HighWatermark: 42}
	start := func(pos int64) []mapping.Range {
		return []mapping.Range{{TopicPartition: tp0, Interval: iv(pos, pos)}}
	}
	for _, c := range []struct {
		name   string
		policy startPolicy
		fresh  bool
		want   []mapping.Range
		head   int64
		ok     bool
	}{
		{"earliest", startPolicy{start: StartEarliest}, false, start(5), 5, true},
		{"earliest, head recorded as lost", startPolicy{start: StartEarliest, recordHeadLoss: true}, false,
			[]mapping.Range{{TopicPartition: tp0, Interval: iv(0, 5), Lost: true}}, 5, true},
		{"latest", startPolicy{start: StartLatest}, false, start(40), 0, true},
		{"latest, once: a partition that appeared later starts at 0", startPolicy{start: StartLatest}, true, start(0), 0, true},
		{"replay offsets", startPolicy{offsets: map[int32]int64{0: 17}, replay: true}, true, start(17), 0, true},
		{"replay offsets without the partition", startPolicy{offsets: map[int32]int64{1: 17}, replay: true}, false, nil, 0, false},
		{"a replay from the log start ignores partitions that appear later", startPolicy{start: StartEarliest, replay: true}, true, start(5), 5, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, head, ok := c.policy.begin(tp0, w, c.fresh)
			if !reflect.DeepEqual(got, c.want) || head != c.head || ok != c.ok {
				t.Fatalf("begin = %v, head %d, ok %v; want %v, %d, %v", got, head, ok, c.want, c.head, c.ok)
			}
		})
	}
}
