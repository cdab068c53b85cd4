package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/floe-dev/floe/internal/text"
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
	for _, r := range byTopic(next) {
		topics = append(topics, fmt.Sprintf("%s: %d to %d", r, r.lo, r.hi))
	}
	return strings.Join(topics, "; ") + " (floe status lists each partition)"
}

// topicRun is one topic's partitions of a map of offsets, with their
// lowest and highest offset.
type topicRun struct {
	topic  string
	parts  []int32
	lo, hi int64
}

// String is "orders/0-3,7 (5 partitions)".
func (r topicRun) String() string {
	return fmt.Sprintf("%s/%s (%s)", r.topic, text.Ranges(r.parts), plural(len(r.parts), "partition"))
}

// byTopic groups offsets by topic, in topic and partition order.
func byTopic(offsets map[mapping.TopicPartition]int64) []topicRun {
	var out []topicRun
	for _, tp := range slices.SortedFunc(maps.Keys(offsets), mapping.TopicPartition.Compare) {
		o := offsets[tp]
		if n := len(out); n > 0 && out[n-1].topic == tp.Topic {
			out[n-1].parts = append(out[n-1].parts, tp.Partition)
			out[n-1].lo, out[n-1].hi = min(out[n-1].lo, o), max(out[n-1].hi, o)
			continue
		}
		out = append(out, topicRun{topic: tp.Topic, parts: []int32{tp.Partition}, lo: o, hi: o})
	}
	return out
}
