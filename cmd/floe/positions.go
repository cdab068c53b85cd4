package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/floe-dev/floe/mapping"
)

// maxListedPositions is how many partitions a summary lists one by one;
// above it, each topic's partitions are summarised (a 1,000-partition
// topic made a 14 KB line).
const maxListedPositions = 8

// formatNext renders next offsets for a run's closing summary: each
// partition's TOPIC/P=OFFSET when there are few, else per topic its
// partitions as ranges, their count and the lowest and highest next
// offset; floe status (and its --json) lists every partition.
func formatNext(next map[mapping.TopicPartition]int64) string {
	tps := slices.SortedFunc(maps.Keys(next), mapping.TopicPartition.Compare)
	if len(tps) <= maxListedPositions {
		parts := make([]string, len(tps))
		for i, tp := range tps {
			parts[i] = fmt.Sprintf("%s=%d", tp, next[tp])
		}
		return strings.Join(parts, " ")
	}
	var topics []string
	for i := 0; i < len(tps); {
		j := i
		lo, hi := next[tps[i]], next[tps[i]]
		var ps []int32
		for ; j < len(tps) && tps[j].Topic == tps[i].Topic; j++ {
			lo, hi = min(lo, next[tps[j]]), max(hi, next[tps[j]])
			ps = append(ps, tps[j].Partition)
		}
		topics = append(topics, fmt.Sprintf("%s/%s (%s): %d to %d", tps[i].Topic, partitionRanges(ps), plural(len(ps), "partition"), lo, hi))
		i = j
	}
	return strings.Join(topics, "; ") + " (floe status lists each partition)"
}

// partitionRanges writes sorted partition numbers as ranges: 0-3,7,9-12.
func partitionRanges(ps []int32) string {
	var out []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if j == i {
			out = append(out, fmt.Sprint(ps[i]))
		} else {
			out = append(out, fmt.Sprintf("%d-%d", ps[i], ps[j]))
		}
		i = j + 1
	}
	return strings.Join(out, ",")
}
