package audit

import (
	"slices"
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// TestChainAgreesWithSpanIndex: a chain fed the ranges that meet its
// offsets, in any order, says what mapping.SpanIndex.Span says of the whole
// ledger: offsets on one unbroken chain of ranges (and its extent), or not
// (a gap, an overlap, a lost or aborted range, offsets beyond the ledger).
func TestChainAgreesWithSpanIndex(t *testing.T) {
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	rng := func(low, high int64) mapping.Range {
		return mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: low, High: high}, Records: high - low}
	}
	lost := rng(20, 30)
	lost.Lost = true
	for _, tc := range []struct {
		name   string
		ranges []mapping.Range
		iv     mapping.Interval
		extent mapping.Interval // zero: not ok
	}{
		{"contiguous", []mapping.Range{rng(0, 10), rng(10, 20), rng(20, 30)}, mapping.Interval{Low: 5, High: 25}, mapping.Interval{Low: 0, High: 30}},
		{"exact", []mapping.Range{rng(0, 10), rng(10, 20)}, mapping.Interval{Low: 0, High: 20}, mapping.Interval{Low: 0, High: 20}},
		{"inside one range", []mapping.Range{rng(0, 100)}, mapping.Interval{Low: 30, High: 40}, mapping.Interval{Low: 0, High: 100}},
		{"gap", []mapping.Range{rng(0, 10), rng(12, 20)}, mapping.Interval{Low: 0, High: 20}, mapping.Interval{}},
		{"overlap", []mapping.Range{rng(0, 10), rng(5, 20)}, mapping.Interval{Low: 0, High: 20}, mapping.Interval{}},
		{"overlap that hides a gap", []mapping.Range{rng(0, 10), rng(5, 15), rng(20, 25)}, mapping.Interval{Low: 0, High: 25}, mapping.Interval{}},
		{"twice the same range", []mapping.Range{rng(0, 10), rng(0, 10), rng(10, 20)}, mapping.Interval{Low: 0, High: 20}, mapping.Interval{}},
		{"lost range", []mapping.Range{rng(0, 10), rng(10, 20), lost}, mapping.Interval{Low: 0, High: 30}, mapping.Interval{}},
		{"beyond the ledger", []mapping.Range{rng(0, 10), rng(10, 20)}, mapping.Interval{Low: 0, High: 25}, mapping.Interval{}},
		{"before the ledger", []mapping.Range{rng(10, 20)}, mapping.Interval{Low: 5, High: 15}, mapping.Interval{}},
		{"empty offsets", []mapping.Range{rng(0, 10)}, mapping.Interval{Low: 5, High: 5}, mapping.Interval{}},
		{"other ranges around", []mapping.Range{rng(0, 10), rng(10, 20), rng(20, 30), rng(30, 40)}, mapping.Interval{Low: 12, High: 28}, mapping.Interval{Low: 10, High: 30}},
	} {
		ledger := mapping.Ledger{}
		for i, r := range tc.ranges {
			ledger.Commits = append(ledger.Commits, mapping.Commit{SnapshotID: int64(i + 1), Ranges: []mapping.Range{r}})
		}
		chain, spanOK := ledger.SpanIndex().Span(tp, tc.iv)
		if spanOK != (tc.extent != mapping.Interval{}) {
			t.Fatalf("%s: the test's expectation %v disagrees with SpanIndex (%v, %v)", tc.name, tc.extent, chain, spanOK)
		}
		orders := [][]mapping.Range{tc.ranges, slices.Clone(tc.ranges)}
		slices.Reverse(orders[1])
		for _, order := range orders {
			x := &chainIndex{}
			id := x.add(tp, tc.iv)
			other := x.add(mapping.TopicPartition{Topic: "t", Partition: 1}, tc.iv)
			x.build()
			for _, r := range order {
				x.meeting(r, func(i int) {
					if i == other {
						t.Fatalf("%s: range %v of partition 0 meets a chain of partition 1", tc.name, r)
					}
					x.chains[i].meet(r)
				})
			}
			c := x.chains[id]
			if c.ok() != spanOK {
				t.Errorf("%s (ranges %v): ok %v, SpanIndex says %v", tc.name, order, c.ok(), spanOK)
				continue
			}
			if spanOK && c.covered[0] != tc.extent {
				t.Errorf("%s: extent %v, want %v", tc.name, c.covered[0], tc.extent)
			}
		}
	}
}

// TestChainIndexMeeting: a range meets the chains whose offsets it
// overlaps (touching at an end is not meeting), whatever their nesting.
func TestChainIndexMeeting(t *testing.T) {
	tp := mapping.TopicPartition{Topic: "t", Partition: 3}
	x := &chainIndex{}
	wide := x.add(tp, mapping.Interval{Low: 0, High: 100})
	a := x.add(tp, mapping.Interval{Low: 10, High: 20})
	b := x.add(tp, mapping.Interval{Low: 20, High: 30})
	c := x.add(tp, mapping.Interval{Low: 50, High: 60})
	x.build()
	for _, tc := range []struct {
		r    mapping.Interval
		want []int
	}{
		{mapping.Interval{Low: 0, High: 10}, []int{wide}},
		{mapping.Interval{Low: 15, High: 25}, []int{wide, a, b}},
		{mapping.Interval{Low: 20, High: 21}, []int{wide, b}},
		{mapping.Interval{Low: 30, High: 50}, []int{wide}},
		{mapping.Interval{Low: 55, High: 200}, []int{wide, c}},
		{mapping.Interval{Low: 100, High: 200}, nil},
		{mapping.Interval{Low: 25, High: 25}, nil}, // empty
	} {
		var got []int
		x.meeting(mapping.Range{TopicPartition: tp, Interval: tc.r}, func(i int) { got = append(got, i) })
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("range %v meets chains %v, want %v", tc.r, got, tc.want)
		}
	}
}
