package mapping

import (
	"math/rand/v2"
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

// TestMeetTiledAgreesWithRanges: on random ledgers cut into blocks (of
// ranges that tile, or with gaps, overlaps, lost ranges, starts, out of
// order), checking chains by taking each tiled block's summary in place
// of its ranges (MeetTiled, as compaction's planner reads the archive)
// gives every chain the verdict that meeting every range gives.
func TestMeetTiledAgreesWithRanges(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	tiled := 0
	for iter := range 2000 {
		tps := []TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}}
		var blocks [][]Range
		next := map[TopicPartition]int64{}
		for range 1 + r.IntN(6) {
			var block []Range
			for range 1 + r.IntN(6) {
				tp := tps[r.IntN(len(tps))]
				low := next[tp]
				switch r.IntN(12) {
				case 0:
					low += 1 + int64(r.IntN(3)) // a gap
				case 1:
					low -= min(low, 1+int64(r.IntN(3))) // an overlap
				}
				high := low + int64(r.IntN(5))
				if r.IntN(8) == 0 {
					high = low // a start
				}
				rg := Range{TopicPartition: tp, Interval: Interval{Low: low, High: high}, Records: high - low}
				if r.IntN(15) == 0 && high > low {
					rg.Lost, rg.Records = true, 0
				}
				block = append(block, rg)
				next[tp] = max(next[tp], high)
			}
			blocks = append(blocks, block)
		}
		var want, got Chains
		for range 1 + r.IntN(4) {
			tp := tps[r.IntN(len(tps))]
			low := int64(r.IntN(int(next[tp]) + 2))
			iv := Interval{Low: low, High: low + 1 + int64(r.IntN(8))}
			want.Add(tp, iv)
			got.Add(tp, iv)
		}
		want.Build()
		got.Build()
		for _, block := range blocks {
			var s Summary
			for _, rg := range block {
				want.Meet(rg)
				s.Add(Commit{Ranges: []Range{rg}})
			}
			if !got.InSummary(s) {
				continue
			}
			if got.MeetTiled(s) {
				tiled++
				continue
			}
			for _, rg := range block {
				got.Meet(rg)
			}
		}
		for i := range want.Len() {
			if want.Chain(i).OK() != got.Chain(i).OK() {
				t.Fatalf("ledger %d, chain %v: OK %v meeting every range, %v taking tiled summaries; blocks %v", iter, want.Chain(i).Offsets, want.Chain(i).OK(), got.Chain(i).OK(), blocks)
			}
		}
	}
	if tiled == 0 {
		t.Fatal("no block was taken by its summary")
	}
}

// TestSummaryTiled: a partition's summary is tiled while its ranges, in
// the order added (or merged), each start where the one before ended and
// none is lost or aborted.
func TestSummaryTiled(t *testing.T) {
	tp := TopicPartition{Topic: "t"}
	sum := func(rs ...Range) Summary {
		var s Summary
		for _, r := range rs {
			r.TopicPartition = tp
			s.Add(Commit{Ranges: []Range{r}})
		}
		return s
	}
	iv := func(low, high int64) Range { return Range{Interval: Interval{Low: low, High: high}} }
	lost := iv(10, 20)
	lost.Lost = true
	for _, tc := range []struct {
		name string
		s    Summary
		want bool
	}{
		{"one range", sum(iv(5, 10)), true},
		{"adjacent, a start first", sum(iv(5, 5), iv(5, 10), iv(10, 20)), true},
		{"a gap", sum(iv(0, 10), iv(11, 20)), false},
		{"an overlap", sum(iv(0, 10), iv(9, 20)), false},
		{"out of order", sum(iv(10, 20), iv(0, 10)), false},
		{"lost", sum(iv(0, 10), lost), false},
	} {
		if got := tc.s.Parts[tp].Tiled; got != tc.want {
			t.Errorf("%s: tiled %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		a, b Summary
		want bool
	}{
		{"adjacent", sum(iv(0, 10)), sum(iv(10, 20)), true},
		{"a gap", sum(iv(0, 10)), sum(iv(12, 20)), false},
		{"not tiled after", sum(iv(0, 10)), sum(iv(10, 20), iv(25, 30)), false},
	} {
		tc.a.Merge(tc.b)
		if got := tc.a.Parts[tp].Tiled; got != tc.want {
			t.Errorf("merged, %s: tiled %v, want %v", tc.name, got, tc.want)
		}
	}
}
