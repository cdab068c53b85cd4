package replay

import (
	"slices"
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// TestPositionBatches: the publish check of a compacting topic reads the
// positions of partitions in batches of maxBatchOffsets offsets at most,
// so that a topic of many long partitions does not hold a bit per offset
// of all of them at once; a partition longer than that is a batch alone.
func TestPositionBatches(t *testing.T) {
	tp := func(p int32) mapping.TopicPartition { return mapping.TopicPartition{Topic: "t", Partition: p} }
	half := mapping.Interval{Low: 0, High: maxBatchOffsets / 2}
	spans := map[mapping.TopicPartition]mapping.Interval{tp(0): half, tp(1): half, tp(2): half, tp(3): {Low: 5, High: 5 + 2*maxBatchOffsets}, tp(4): {Low: 0, High: 10}}
	batches := positionBatches(spans)
	var sizes []int
	seen := 0
	for _, b := range batches {
		var n int64
		for _, in := range b {
			n += in.Len()
		}
		if n > maxBatchOffsets && len(b) > 1 {
			t.Errorf("a batch of %d partitions holds %d offsets, past %d", len(b), n, maxBatchOffsets)
		}
		sizes = append(sizes, len(b))
		seen += len(b)
	}
	if seen != len(spans) || !slices.Equal(sizes, []int{2, 1, 1, 1}) {
		t.Errorf("batches of %v partitions; want the 5 partitions, in order, in batches of 2, 1, 1 and 1", sizes)
	}
}
