package connector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Deleted is what the broker says about offsets [From, LogStart) of a
// partition that retention deleted before a reader got to them.
type Deleted int

const (
	// DeletedCommitted: nothing shows that the offsets held only aborted
	// records, so committed records may be among them: a loss.
	DeletedCommitted Deleted = iota
	// DeletedAborted: the offsets lie inside aborted transactions that
	// began at or before From and ended after the log start, the log still
	// holds some of their records, every record it holds up to their
	// abort markers belongs to an aborted transaction, and their
	// producers' sequence numbers leave room for the deleted offsets.
	DeletedAborted
	// DeletedUndecided: an open transaction holds the log start; whether its
	// records were committed is known only when it ends.
	DeletedUndecided
)

// DeletedVerdict is ClassifyDeleted's answer.
type DeletedVerdict struct {
	Deleted Deleted
	// Evidence says what the broker showed, for logs and messages.
	Evidence string
}

// ClassifyDeleted decides whether offsets [from, logStart) of a partition,
// deleted by retention before they were read, held committed records.
//
// A reader stops at the last stable offset while a transaction is open, so
// a ledger can end where an open transaction begins; when that transaction
// is aborted and retention then deletes into its records, only aborted
// records were deleted and nothing was lost. The broker keeps the evidence
// in the retained log: a read_committed fetch at the log start lists the
// aborted transactions that overlap it with their first offsets (Kafka's
// aborted-transaction index), and the log holds their abort markers. The
// offsets are judged aborted when aborted transactions began at or before
// from, the log still holds some of their records, and every record from
// the log start up to their abort markers is a record of an aborted
// transaction, and the transactions' producers' sequence numbers leave
// room for as many of their records before the log start as there are
// deleted offsets (boundBySequences). That is what the broker can still
// show, and it is evidence, not proof: a committed record of another
// producer inside the deleted part of the transaction's span leaves no
// trace when the producer's earlier records leave its sequence numbers
// room for it. A record of another producer in the retained part of the
// span, too little room, or a span retention deleted whole, makes the
// offsets a loss; the sink records a judgement in the ledger as an aborted
// range, which the audit reports.
func (b *Broker) ClassifyDeleted(ctx context.Context, topic string, partition int32, from, logStart int64) (DeletedVerdict, error) {
	committed := DeletedVerdict{Deleted: DeletedCommitted}
	if from >= logStart {
		return DeletedVerdict{Deleted: DeletedAborted, Evidence: "nothing was deleted"}, nil
	}
	fail := func(err error) (DeletedVerdict, error) {
		return committed, fmt.Errorf("classify the deleted offsets [%d, %d) of %s/%d: %w", from, logStart, topic, partition, err)
	}
	rp, err := b.abortIndex(ctx, topic, partition, logStart)
	if err != nil {
		return fail(err)
	}
	aborted := map[int64]int64{} // producer id -> first offset of its aborted transaction
	for _, at := range rp.AbortedTransactions {
		if f, ok := aborted[at.ProducerID]; !ok || at.FirstOffset < f {
			aborted[at.ProducerID] = at.FirstOffset
		}
	}
	spanning := map[int64]bool{} // aborted transactions that began at or before from
	for id, first := range aborted {
		if first <= from {
			spanning[id] = true
		}
	}
	// Scan the retained log from the log start: the spanning transactions
	// must end with abort markers before any record that is not a record
	// of an aborted transaction, and some of their records must still be
	// there to show it.
	var (
		verdict = committed
		ended   = map[int64]bool{}
		seen    = false // a retained record of a spanning transaction
	)
	err = b.ReadLog(ctx, topic, partition, logStart, rp.HighWatermark, func(rec *kgo.Record, _ int64) bool {
		if len(spanning) == 0 {
			// No aborted transaction reaches back to from. The deleted
			// offsets are undecided only while an open transaction holds
			// the log start: the first record is then unstable.
			if !rec.Attrs.IsControl() && rec.Offset >= rp.LastStableOffset {
				verdict = DeletedVerdict{Deleted: DeletedUndecided,
					Evidence: fmt.Sprintf("an open transaction of producer %d holds the log start", rec.ProducerID)}
			}
			return rec.Attrs.IsControl()
		}
		if rec.Attrs.IsControl() {
			if commit, known := MarkerType(rec.Key); spanning[rec.ProducerID] && known && !commit {
				ended[rec.ProducerID] = true
				if len(ended) == len(spanning) {
					if seen {
						verdict = DeletedVerdict{Deleted: DeletedAborted, Evidence: describeSpanning(spanning, aborted, rec.Offset)}
					} else {
						verdict.Evidence = "retention deleted every record of the aborted transactions spanning the offsets, so the log cannot show what else they held"
					}
					return false
				}
			}
			return true
		}
		if _, ok := aborted[rec.ProducerID]; !ok || !rec.Attrs.IsTransactional() {
			verdict.Evidence = fmt.Sprintf("offset %d, before the abort marker of the transaction spanning the deleted offsets, holds a record of producer %d, which was not aborted", rec.Offset, rec.ProducerID)
			return false
		}
		seen = seen || spanning[rec.ProducerID]
		return true
	})
	if err != nil {
		return fail(err)
	}
	if verdict.Deleted == DeletedAborted {
		verdict = boundBySequences(verdict, rp.RecordBatches, spanning, from, logStart)
	}
	return verdict, nil
}

// controlBatch is the record batch attribute of a batch of control
// records (transaction markers), bit 5.
const controlBatch = 0x20

// boundBySequences checks an aborted verdict against the producers'
// sequence numbers: a producer numbers its records of a partition one by
// one, so its first record at or after the log start, numbered n, leaves
// room for at most n of its records before it. When the spanning
// transactions' producers together have less room than the deleted
// offsets [from, logStart) number, some of those offsets held another
// producer's records: a loss. batches are the record batches the broker
// answered at the log start; a producer with no batch there, or without
// sequence numbers, leaves the verdict as it is.
func boundBySequences(v DeletedVerdict, batches []byte, spanning map[int64]bool, from, logStart int64) DeletedVerdict {
	room := map[int64]int64{}
	for len(batches) >= 12 && len(room) < len(spanning) {
		size := 12 + int64(int32(binary.BigEndian.Uint32(batches[8:12])))
		if size < 12 || size > int64(len(batches)) {
			break // the answer ends inside a batch
		}
		var b kmsg.RecordBatch
		err := b.ReadFrom(batches[:size])
		batches = batches[size:]
		if err != nil || !spanning[b.ProducerID] || b.FirstSequence < 0 || b.Attributes&controlBatch != 0 {
			continue // not a data batch of a spanning transaction
		}
		last := b.FirstOffset + int64(b.LastOffsetDelta)
		if _, seen := room[b.ProducerID]; seen || last < logStart {
			continue
		}
		room[b.ProducerID] = int64(b.FirstSequence) + max(logStart, b.FirstOffset) - b.FirstOffset
	}
	if len(room) < len(spanning) {
		return v
	}
	var total int64
	for _, n := range room {
		total += n
	}
	if deleted := logStart - from; deleted > total {
		return DeletedVerdict{Deleted: DeletedCommitted, Evidence: fmt.Sprintf(
			"the sequence numbers of the aborted transactions' producers leave room for at most %d of their records before the log start, but %d offsets [%d, %d) were deleted: the others held records of other producers",
			total, deleted, from, logStart)}
	}
	return v
}

// abortIndex fetches the partition at offset with read_committed isolation,
// for the aborted transactions the answer lists, retrying what can be
// retried as ReadLog does. When the log start has moved past offset since,
// it fetches at the log start: an aborted transaction that spans offsets
// below it is listed there too.
func (b *Broker) abortIndex(ctx context.Context, topic string, partition int32, offset int64) (*kmsg.FetchResponseTopicPartition, error) {
	r := &logReader{b: b, topic: topic, partition: partition, leader: -1}
	var last error
	for attempt := range readLogRetries {
		if attempt > 0 {
			r.leader = -1
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
			case <-time.After(min(readLogBackoff<<min(attempt-1, 4), time.Second)):
			}
		}
		rp, throttle, err := r.fetchIsolated(ctx, offset, 1)
		if err == nil && rp == nil {
			err = fmt.Errorf("throttled for %s", throttle)
		}
		if err == nil {
			err = kerr.ErrorForCode(rp.ErrorCode)
		}
		switch {
		case err == nil:
			return rp, nil
		case errors.Is(err, kerr.OffsetOutOfRange):
			start, _, berr := r.bounds(ctx)
			if berr != nil {
				last = berr
				continue
			}
			if start <= offset {
				return nil, err
			}
			offset = start
		case isRetriable(err) || rp == nil:
			last = err
		default:
			return nil, err
		}
	}
	return nil, fmt.Errorf("%d attempts failed, the last with: %w", readLogRetries, last)
}

// describeSpanning names the aborted transactions that span deleted offsets.
func describeSpanning(spanning map[int64]bool, first map[int64]int64, lastMarker int64) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(spanning)) {
		parts = append(parts, fmt.Sprintf("producer %d from offset %d", id, first[id]))
	}
	return fmt.Sprintf("aborted transactions (%s; abort marker at offset %d) span the deleted offsets, and the log holds no other record up to their markers", strings.Join(parts, ", "), lastMarker)
}

// MarkerType reads a transaction marker's key: version int16, type int16
// (0 abort, 1 commit). known is false for a key that holds neither.
func MarkerType(key []byte) (commit, known bool) {
	if len(key) < 4 {
		return false, false
	}
	switch binary.BigEndian.Uint16(key[2:4]) {
	case 0:
		return false, true
	case 1:
		return true, true
	}
	return false, false
}
