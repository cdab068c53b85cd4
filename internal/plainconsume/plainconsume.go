// Package plainconsume is the baseline of floe's throughput benchmarks: a
// plain franz-go read_committed consumer that reads a topic to given end
// offsets and does nothing with the records. It imports franz-go only, so
// that a process of it (cmd/plainconsume) starts as fast as such a
// consumer does.
package plainconsume

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The fetch sizes of floe sink (connector/session.go, fetchMaxBytes and
// fetchMaxPartitionBytes), repeated here because this package imports
// franz-go only. The baseline reads as the sink reads: with franz-go's
// defaults (50 MiB a fetch, 1 MiB a partition) a consumer of a
// 1,000-partition topic read 2.4-3.1 times slower than with these, at twice
// the CPU per record, and slower than the sink: sink/consume there
// measured the baseline's fetches, not the sink (docs/performance.md, a
// wide topic at full rate).
const (
	fetchMaxBytes          = 1 << 20
	fetchMaxPartitionBytes = fetchMaxBytes / 4
)

// All reads every partition of topic from its start to its end
// offset (ends, by partition) with a plain franz-go read_committed
// consumer of the sink's fetch sizes, the baseline a sink cannot beat, and
// returns the records read.
func All(ctx context.Context, brokers []string, topic string, ends map[int32]int64) (int, error) {
	assign := map[int32]kgo.Offset{}
	for p := range ends {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxBytes(fetchMaxBytes), kgo.FetchMaxPartitionBytes(fetchMaxPartitionBytes))
	if err != nil {
		return 0, fmt.Errorf("create consumer: %w", err)
	}
	defer cl.Close()
	left := len(ends)
	count := 0
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return count, fmt.Errorf("consume %s: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			count++
			if r.Offset+1 == ends[r.Partition] {
				left--
			}
		})
	}
	return count, nil
}
