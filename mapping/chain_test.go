package mapping

import (
	"slices"
	"testing"
)

// TestChain: a chain fed the ranges that meet its offsets, in any order,
// tells whether they lie on one unbroken chain of ranges (and its extent)
// or not: a gap, an overlap, a lost or aborted range, offsets beyond the
// ledger.
func TestChain(t *testing.T) {
	tp := TopicPartition{Topic: "t", Partition: 0}
	rng := func(low, high int64) Range {
		return Range{TopicPartition: tp, Interval: Interval{Low: low, High: high}, Records: high - low}
	}
	lost := rng(20, 30)
	lost.Lost = true
	for _, tc := range []struct {
		name   string
		ranges []Range
		iv     Interval
		extent Interval // zero: not ok
	}{
		{"contiguous", []Range{rng(0, 10), rng(10, 20), rng(20, 30)}, Interval{Low: 5, High: 25}, Interval{Low: 0, High: 30}},
		{"exact", []Range{rng(0, 10), rng(10, 20)}, Interval{Low: 0, High: 20}, Interval{Low: 0, High: 20}},
		{"inside one range", []Range{rng(0, 100)}, Interval{Low: 30, High: 40}, Interval{Low: 0, High: 100}},
		{"with empty ranges", []Range{rng(0, 10), rng(10, 10), rng(10, 20)}, Interval{Low: 0, High: 20}, Interval{Low: 0, High: 20}},
		{"gap", []Range{rng(0, 10), rng(12, 20)}, Interval{Low: 0, High: 20}, Interval{}},
		{"overlap", []Range{rng(0, 10), rng(5, 20)}, Interval{Low: 0, High: 20}, Interval{}},
		{"overlap that hides a gap", []Range{rng(0, 10), rng(5, 15), rng(20, 25)}, Interval{Low: 0, High: 25}, Interval{}},
		{"twice the same range", []Range{rng(0, 10), rng(0, 10), rng(10, 20)}, Interval{Low: 0, High: 20}, Interval{}},
		{"lost range", []Range{rng(0, 10), rng(10, 20), lost}, Interval{Low: 0, High: 30}, Interval{}},
		{"into a lost range", []Range{rng(0, 10), rng(10, 20), lost}, Interval{Low: 15, High: 25}, Interval{}},
		{"beyond the ledger", []Range{rng(0, 10), rng(10, 20)}, Interval{Low: 0, High: 25}, Interval{}},
		{"before the ledger", []Range{rng(10, 20)}, Interval{Low: 5, High: 15}, Interval{}},
		{"empty offsets", []Range{rng(0, 10)}, Interval{Low: 5, High: 5}, Interval{}},
		{"other ranges around", []Range{rng(0, 10), rng(10, 20), rng(20, 30), rng(30, 40)}, Interval{Low: 12, High: 28}, Interval{Low: 10, High: 30}},
	} {
		orders := [][]Range{tc.ranges, slices.Clone(tc.ranges)}
		slices.Reverse(orders[1])
		for _, order := range orders {
			x := &Chains{}
			id := x.Add(tp, tc.iv)
			other := x.Add(TopicPartition{Topic: "t", Partition: 1}, tc.iv)
			otherTopic := x.Add(TopicPartition{Topic: "u", Partition: 0}, tc.iv)
			x.Build()
			for _, r := range order {
				x.Meet(r)
			}
			c := x.Chain(id)
			if ok := tc.extent != (Interval{}); c.OK() != ok {
				t.Errorf("%s (ranges %v): ok %v, want %v", tc.name, order, c.OK(), ok)
				continue
			}
			if c.OK() && c.Extent() != tc.extent {
				t.Errorf("%s: extent %v, want %v", tc.name, c.Extent(), tc.extent)
			}
			if x.Chain(other).OK() || x.Chain(otherTopic).OK() {
				t.Errorf("%s: ranges of (t, 0) placed a chain of another partition", tc.name)
			}
		}
	}
}

// TestChainsMeeting: a range meets the chains whose offsets it overlaps
// (touching at an end is not meeting), whatever their nesting, and a
// summary is in the chains when a partition's span meets one.
func TestChainsMeeting(t *testing.T) {
	tp := TopicPartition{Topic: "t", Partition: 3}
	x := &Chains{}
	wide := x.Add(tp, Interval{Low: 0, High: 100})
	a := x.Add(tp, Interval{Low: 10, High: 20})
	b := x.Add(tp, Interval{Low: 20, High: 30})
	c := x.Add(tp, Interval{Low: 50, High: 60})
	x.Build()
	for _, tc := range []struct {
		r    Interval
		want []int
	}{
		{Interval{Low: 0, High: 10}, []int{wide}},
		{Interval{Low: 15, High: 25}, []int{wide, a, b}},
		{Interval{Low: 20, High: 21}, []int{wide, b}},
		{Interval{Low: 30, High: 50}, []int{wide}},
		{Interval{Low: 55, High: 200}, []int{wide, c}},
		{Interval{Low: 100, High: 200}, nil},
		{Interval{Low: 25, High: 25}, nil}, // empty
	} {
		var got []int
		x.Meeting(Range{TopicPartition: tp, Interval: tc.r}, func(i int) { got = append(got, i) })
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("range %v meets chains %v, want %v", tc.r, got, tc.want)
		}
	}
	summary := func(rs ...Range) Summary {
		var l Ledger
		for i, r := range rs {
			l.Commits = append(l.Commits, Commit{SnapshotID: int64(i + 1), Ranges: []Range{r}})
		}
		return l.Summarize()
	}
	if !x.InSummary(summary(Range{TopicPartition: tp, Interval: Interval{Low: 90, High: 95}, Records: 5})) {
		t.Error("a block with offsets 90-95 of the partition is not in the chains")
	}
	if x.InSummary(summary(Range{TopicPartition: tp, Interval: Interval{Low: 100, High: 120}, Records: 20}, Range{TopicPartition: TopicPartition{Topic: "t", Partition: 4}, Interval: Interval{Low: 0, High: 20}, Records: 20})) {
		t.Error("a block of offsets no chain asks about is in the chains")
	}
}
