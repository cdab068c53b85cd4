package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readLogIdle is how long ReadLog waits for a fetch that returns nothing
// before it concludes that no record is left below its end offset (the
// remaining offsets were compacted away or deleted).
const readLogIdle = 3 * time.Second

// ReadLog reads the records of one partition whose offsets lie in
// [from, to), in offset order, as the log holds them: with read_uncommitted
// isolation and control records kept, so committed, aborted and still open
// transactional records and transaction markers are all seen. Offsets with
// no record (compacted away, or deleted by retention) are absent.
//
// fn gets each record and the log start offset the broker reported with it;
// it returns false to stop the read. ReadLog returns nil when fn stops it,
// when the record at to-1 was read, or when the broker has no record left
// below to.
func (b *Broker) ReadLog(ctx context.Context, topic string, partition int32, from, to int64, fn func(r *kgo.Record, logStart int64) bool) error {
	if from >= to {
		return nil
	}
	opts := append(slices.Clone(b.opts),
		kgo.SeedBrokers(b.Seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(readLogIdle/3),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("read %s/%d: create consumer: %w", topic, partition, err)
	}
	defer cl.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, readLogIdle)
		fetches := cl.PollFetches(pctx)
		idle := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s/%d from offset %d: %w", topic, partition, from, err)
		}
		var (
			got, done bool
			failure   error
		)
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if fp.Err != nil {
				if !errors.Is(fp.Err, context.DeadlineExceeded) && !errors.Is(fp.Err, context.Canceled) && failure == nil {
					failure = fmt.Errorf("read %s/%d: %w", topic, partition, fp.Err)
				}
				return
			}
			for _, r := range fp.Records {
				if done {
					return
				}
				got = true
				if r.Offset < from {
					continue
				}
				if r.Offset >= to || !fn(r, fp.LogStartOffset) || r.Offset >= to-1 {
					done = true
				}
			}
		})
		switch {
		case failure != nil:
			return failure
		case done, !got && idle:
			return nil
		}
	}
}
