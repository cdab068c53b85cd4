package connector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/floe-dev/floe/mapping"
)

// ReadLogTimeout bounds a ReadLog whose context has no deadline of its own.
// It is a safety net against a broker that never lets the read finish, not
// a way to end it: reaching it is an error.
const ReadLogTimeout = time.Hour

// readLog tunes the fetches of ReadLog.
const (
	readLogMaxWait  = 500 * time.Millisecond // how long the broker may hold a fetch with nothing to return
	readLogMaxBytes = 8 << 20                // per fetch; a larger first batch is still returned whole
	readLogRetries  = 30                     // consecutive retriable failures before giving up
	readLogBackoff  = 100 * time.Millisecond // the first wait after one, doubling up to a second
)

// ReadLog reads the records of one partition whose offsets lie in
// [from, to), in offset order, as the log holds them: with read_uncommitted
// isolation and control records kept, so committed, aborted and still open
// transactional records and transaction markers are all seen. Offsets with
// no record (compacted away, or deleted by retention) are absent.
//
// fn gets each record and the log start offset the broker reported with it;
// it returns false to stop the read. ReadLog returns nil when fn stops it,
// or once it has read everything the log holds below to, or below the
// partition's high watermark when that is lower: the read ends at that
// position as the broker reports it, never after a quiet spell, so a slow
// broker makes it slower, not shorter. Offsets below the log start are
// skipped. It returns an error when the broker fails (after retrying what
// can be retried) or ctx ends, and when the read has not ended after
// ReadLogTimeout unless ctx has a deadline of its own.
func (b *Broker) ReadLog(ctx context.Context, topic string, partition int32, from, to int64, fn func(r *kgo.Record, logStart int64) bool) error {
	if from >= to {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ReadLogTimeout)
		defer cancel()
	}
	r := &logReader{b: b, topic: topic, partition: partition}
	offset := from
	fail := func(err error) error {
		return fmt.Errorf("read %s/%d, offsets [%d, %d), at offset %d: %w", topic, partition, from, to, offset, err)
	}
	failures := 0
	retry := func(err error) error {
		failures++
		if failures > readLogRetries {
			return fail(fmt.Errorf("%d attempts failed, the last with: %w", failures, err))
		}
		r.leader = -1 // look it up again
		wait := min(readLogBackoff<<min(failures-1, 4), time.Second)
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("%w (last error: %v)", ctx.Err(), err))
		case <-time.After(wait):
			return nil
		}
	}
	decompressor := kgo.DefaultDecompressor()
	for {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		rp, throttle, err := r.fetch(ctx, offset)
		switch {
		case err != nil && ctx.Err() != nil:
			return fail(fmt.Errorf("%w (last error: %v)", ctx.Err(), err))
		case err != nil && isRetriable(err):
			if err := retry(err); err != nil {
				return err
			}
			continue
		case err != nil:
			return fail(err)
		case rp == nil: // throttled
			select {
			case <-ctx.Done():
				return fail(ctx.Err())
			case <-time.After(throttle):
			}
			continue
		}
		switch perr := kerr.ErrorForCode(rp.ErrorCode); {
		case perr == nil:
		case errors.Is(perr, kerr.OffsetOutOfRange):
			// Retention deleted the offset since (skip to the log start),
			// or the log ends before it.
			start, end, err := r.bounds(ctx)
			switch {
			case err != nil:
				if err := retry(err); err != nil {
					return err
				}
			case offset < start:
				offset = start
				failures = 0
			case offset >= end:
				return nil
			default:
				if err := retry(perr); err != nil {
					return err
				}
			}
			continue
		case kerr.IsRetriable(perr):
			if err := retry(perr); err != nil {
				return err
			}
			continue
		default:
			return fail(r.b.authorization(perr, "Read", r.topic, ""))
		}
		if rp.PreferredReadReplica >= 0 {
			r.leader = rp.PreferredReadReplica
			continue
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			KeepControlRecords: true,
			Offset:             offset,
			IsolationLevel:     kgo.ReadUncommitted(),
			Topic:              topic,
			Partition:          partition,
		}, rp, decompressor, nil)
		if fp.Err != nil {
			return fail(fp.Err)
		}
		for _, rec := range fp.Records {
			if rec.Offset < offset {
				continue
			}
			// franz-go's time of a timestamp outside 1677..2262 overflowed.
			rec.Timestamp = mapping.RecordTime(rec.Timestamp)
			if rec.Offset >= to || !fn(rec, fp.LogStartOffset) || rec.Offset >= to-1 {
				return nil
			}
		}
		end := min(to, rp.HighWatermark)
		switch {
		case next >= end:
			return nil // read up to the end
		case next > offset:
			offset = next
			failures = 0
		case len(rp.RecordBatches) > 0:
			// Data, but none at or after offset: a broker bug.
			if err := retry(fmt.Errorf("the broker returned %d bytes of batches that end before the offset asked for", len(rp.RecordBatches))); err != nil {
				return err
			}
		case throttle > 0:
			// A throttled fetch is empty: wait as asked and fetch again.
			select {
			case <-ctx.Done():
				return fail(ctx.Err())
			case <-time.After(throttle):
			}
		default:
			// Nothing at or after offset below the high watermark: the
			// rest of [offset, end) holds no record (compacted away).
			return nil
		}
	}
}

// logReader sends ReadLog's fetches to the partition's leader.
type logReader struct {
	b         *Broker
	topic     string
	partition int32
	id        kadm.TopicID
	leader    int32 // -1: unknown
	located   bool
}

// locate looks up the topic's id and the partition's leader.
func (r *logReader) locate(ctx context.Context) error {
	tds, err := r.b.adm.ListTopics(ctx, r.topic)
	if err != nil {
		return err
	}
	td, ok := tds[r.topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return unknownTopic(r.topic, r.b.Seeds, "")
	}
	if td.Err != nil {
		return r.b.authorization(td.Err, "Describe", r.topic, "")
	}
	pd, ok := td.Partitions[r.partition]
	if !ok {
		return fmt.Errorf("topic %q has no partition %d", r.topic, r.partition)
	}
	if pd.Err != nil {
		return pd.Err
	}
	if pd.Leader < 0 {
		return kerr.LeaderNotAvailable
	}
	r.id, r.leader, r.located = td.ID, pd.Leader, true
	return nil
}

// fetch sends one read_uncommitted fetch at offset to the leader and
// returns the partition's part of the answer and how long the broker asks
// the client to wait (throttling).
func (r *logReader) fetch(ctx context.Context, offset int64) (*kmsg.FetchResponseTopicPartition, time.Duration, error) {
	return r.fetchIsolated(ctx, offset, 0)
}

// fetchIsolated is fetch with an isolation level: 0 read_uncommitted, 1
// read_committed (the answer then lists the aborted transactions that
// overlap it).
func (r *logReader) fetchIsolated(ctx context.Context, offset int64, isolation int8) (*kmsg.FetchResponseTopicPartition, time.Duration, error) {
	if !r.located || r.leader < 0 {
		if err := r.locate(ctx); err != nil {
			return nil, 0, err
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(readLogMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = readLogMaxBytes
	req.IsolationLevel = isolation
	req.SessionID = 0
	req.SessionEpoch = -1 // no fetch session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = r.topic
	rt.TopicID = r.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = r.partition
	rp.CurrentLeaderEpoch = -1
	rp.FetchOffset = offset
	rp.LastFetchedEpoch = -1
	rp.LogStartOffset = -1
	rp.PartitionMaxBytes = readLogMaxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.b.cl.Broker(int(r.leader)))
	if err != nil {
		return nil, 0, err
	}
	throttle := time.Duration(resp.ThrottleMillis) * time.Millisecond
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, throttle, err
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != r.topic && t.TopicID != r.id {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == r.partition {
				return &t.Partitions[j], throttle, nil
			}
		}
	}
	if throttle > 0 {
		return nil, throttle, nil // throttled: nothing this time
	}
	return nil, 0, errors.New("the fetch response does not hold the partition")
}

// bounds returns the partition's log start and high watermark.
func (r *logReader) bounds(ctx context.Context) (start, end int64, err error) {
	starts, err := r.b.adm.ListStartOffsets(ctx, r.topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return 0, 0, err
	}
	ends, err := r.b.adm.ListEndOffsets(ctx, r.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, 0, err
	}
	s, ok1 := starts.Lookup(r.topic, r.partition)
	e, ok2 := ends.Lookup(r.topic, r.partition)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("the broker did not list the offsets of partition %d", r.partition)
	}
	return s.Offset, e.Offset, nil
}

// isRetriable reports whether a failed request may succeed when tried
// again: a retriable Kafka error (a leader moving, a broker starting) or a
// failed connection.
func isRetriable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return connFailed(err)
}

// connFailed reports whether err is a failed connection: refused, reset,
// closed, timed out, a host not found; not an answer.
func connFailed(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
