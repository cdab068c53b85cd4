package mapping

import (
	"testing"
)

func TestSpan(t *testing.T) {
	tp := TopicPartition{Topic: "t", Partition: 0}
	other := TopicPartition{Topic: "t", Partition: 1}
	rng := func(lo, hi, records int64) Range {
		return Range{TopicPartition: tp, Interval: Interval{Low: lo, High: hi}, Records: records}
	}
	lost := rng(40, 50, 0)
	lost.Records, lost.Lost = 0, true
	l := Ledger{Commits: []Commit{
		{SnapshotID: 1, Ranges: []Range{{TopicPartition: tp, Interval: Interval{Low: 0, High: 0}}, rng(0, 10, 10)}},
		{SnapshotID: 2, Ranges: []Range{rng(10, 20, 9), {TopicPartition: other, Interval: Interval{Low: 0, High: 5}, Records: 5}}},
		{SnapshotID: 3, Ranges: []Range{rng(20, 30, 10)}},
		{SnapshotID: 4, Ranges: []Range{rng(30, 40, 10), lost}},
		{SnapshotID: 5, Ranges: []Range{rng(50, 60, 10)}},
		{SnapshotID: 6, Ranges: []Range{rng(70, 80, 10)}}, // a gap before it
	}}
	ix := l.SpanIndex()
	for _, tc := range []struct {
		iv    Interval
		snaps []int64
	}{
		{Interval{0, 10}, []int64{1}},
		{Interval{3, 7}, []int64{1}},
		{Interval{0, 30}, []int64{1, 2, 3}},
		{Interval{9, 11}, []int64{1, 2}},
		{Interval{15, 40}, []int64{2, 3, 4}},
		{Interval{35, 45}, nil}, // into the lost range
		{Interval{35, 55}, nil}, // across it
		{Interval{55, 75}, nil}, // across the gap
		{Interval{75, 81}, nil}, // beyond the ledger
		{Interval{-1, 5}, nil},  // below it
		{Interval{5, 5}, nil},   // empty
	} {
		got, ok := ix.Span(tp, tc.iv)
		if ok != (tc.snaps != nil) {
			t.Errorf("Span(%s) ok = %v, want %v", tc.iv, ok, tc.snaps != nil)
			continue
		}
		var snaps []int64
		for _, r := range got {
			snaps = append(snaps, r.SnapshotID)
		}
		if len(snaps) != len(tc.snaps) {
			t.Errorf("Span(%s) = %v, want snapshots %v", tc.iv, got, tc.snaps)
			continue
		}
		for i := range snaps {
			if snaps[i] != tc.snaps[i] {
				t.Errorf("Span(%s) = %v, want snapshots %v", tc.iv, got, tc.snaps)
			}
		}
	}
	if _, ok := ix.Span(other, Interval{0, 5}); !ok {
		t.Error("partition 1 has its own chain")
	}
	if _, ok := ix.Span(TopicPartition{Topic: "u", Partition: 0}, Interval{0, 5}); ok {
		t.Error("a topic the ledger does not have spans nothing")
	}
	// Overlapping ranges do not chain.
	ov := Ledger{Commits: []Commit{{SnapshotID: 1, Ranges: []Range{rng(0, 10, 10)}}, {SnapshotID: 2, Ranges: []Range{rng(5, 15, 10)}}}}
	if got, ok := ov.SpanIndex().Span(tp, Interval{0, 15}); ok {
		t.Errorf("overlapping ranges chained: %v", got)
	}
}
