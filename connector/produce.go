package connector

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
)

// ErrNoPartition is Produce's error for a partition the topic lacks.
var ErrNoPartition = errors.New("no partition")

// ByKey is the partition of Produce that partitions records by key.
const ByKey int32 = -1

// Produced is what Produce wrote: per partition, the offsets its records
// took, from the first's to past the last's.
type Produced struct {
	Records int64
	Offsets map[mapping.TopicPartition]mapping.Interval
}

// Produce writes the records of records to topic, in their order within
// each partition, and returns once the brokers have acknowledged every
// one (acks=all, idempotent): floe produce, the producer of the local
// stack's walkthroughs and the docs' recipes, which need none installed
// and is secured as every client of b is. partition is every record's
// partition, or ByKey: by the key's hash as the Java client places it
// (murmur2), records without a key spread. A topic the brokers lack is
// created when they create topics on first use, and an error naming it
// otherwise. The first error of records, or of a write, stops the
// reading; Produced then counts the records the brokers acknowledged.
func (b *Broker) Produce(ctx context.Context, topic string, partition int32, records iter.Seq2[*kgo.Record, error]) (Produced, error) {
	done := Produced{Offsets: map[mapping.TopicPartition]mapping.Interval{}}
	t, err := b.createdTopic(ctx, topic)
	if err != nil {
		return done, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(b.Seeds...)}
	if partition != ByKey {
		if !slices.Contains(t.Partitions, partition) {
			return done, fmt.Errorf("topic %s has %w %d: its partitions are %s", topic, ErrNoPartition, partition, partitionList(t.Partitions))
		}
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	// A record not acknowledged by then fails, where the client would
	// retry it for as long as the brokers stay away, without a word.
	opts = append(opts, kgo.RecordDeliveryTimeout(ProduceTimeout))
	cl, err := kgo.NewClient(append(opts, b.opts...)...)
	if err != nil {
		return done, fmt.Errorf("produce to %s: %w", topic, err)
	}
	defer cl.Close()
	var (
		mu    sync.Mutex
		first error
	)
	keep := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
	acked := func(r *kgo.Record, err error) {
		if err != nil {
			if errors.Is(err, kgo.ErrRecordTimeout) {
				err = fmt.Errorf("the brokers did not acknowledge a record within %s: %w", ProduceTimeout, err)
			}
			keep(b.authorization(err, "Write", topic, ""))
			return
		}
		mu.Lock()
		defer mu.Unlock()
		tp := mapping.TopicPartition{Topic: topic, Partition: r.Partition}
		iv, ok := done.Offsets[tp]
		if !ok {
			iv = mapping.Interval{Low: r.Offset, High: r.Offset + 1}
		}
		done.Offsets[tp] = mapping.Interval{Low: min(iv.Low, r.Offset), High: max(iv.High, r.Offset+1)}
		done.Records++
	}
	// An interrupt (ctx) ends the reading, not the writes: a record
	// handed over is written or fails on its own, and the summary counts
	// what was written, as kcat flushes what it read on Ctrl-C.
	write := context.WithoutCancel(ctx)
	for r, err := range records {
		if err == nil && ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %w", context.Cause(ctx))
		}
		if err != nil {
			keep(err)
			break
		}
		if failed() != nil {
			break
		}
		r.Topic = topic
		if partition != ByKey {
			r.Partition = partition
		}
		cl.Produce(write, r, acked)
	}
	// Every record handed over is acknowledged or failed once Flush
	// returns (RecordDeliveryTimeout bounds it).
	if err := cl.Flush(write); err != nil {
		keep(err)
	}
	if err := failed(); err != nil {
		return done, fmt.Errorf("produce to %s: %w", topic, err)
	}
	return done, nil
}

// ProduceTimeout is how long Produce waits for the brokers to acknowledge
// a record.
const ProduceTimeout = 30 * time.Second

// createdTopic describes topic, asking the brokers to create it first when
// they lack it: they do when they create topics on first use
// (auto.create.topics.enable), as a producer's metadata request asks.
func (b *Broker) createdTopic(ctx context.Context, topic string) (Topic, error) {
	t, err := b.Topic(ctx, topic)
	if !errors.Is(err, ErrUnknownTopic) {
		return t, err
	}
	resp, merr := b.topicMetadata(ctx, topic, true)
	if merr != nil {
		return t, fmt.Errorf("create topic %s: %w", topic, b.authorization(merr, "Create", topic, ""))
	}
	for _, rt := range resp.Topics {
		if code := kerr.ErrorForCode(rt.ErrorCode); code != nil && !errors.Is(code, kerr.UnknownTopicOrPartition) && !errors.Is(code, kerr.LeaderNotAvailable) {
			return t, fmt.Errorf("create topic %s: %w", topic, b.authorization(code, "Create", topic, ""))
		}
	}
	if t, err2 := b.Topic(ctx, topic); err2 == nil {
		return t, nil
	}
	return t, fmt.Errorf("%w; they do not create a topic when it is first written to: create it first (kafka-topics.sh --bootstrap-server %s --create --topic %s --partitions N)",
		err, b.Seeds[0], topic)
}

// partitionList says a topic's partitions: "0-3", or each one.
func partitionList(ps []int32) string {
	if len(ps) == 0 {
		return "none"
	}
	if len(ps) == 1 {
		return fmt.Sprint(ps[0])
	}
	if int(ps[len(ps)-1]-ps[0])+1 == len(ps) {
		return fmt.Sprintf("%d-%d", ps[0], ps[len(ps)-1])
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}
