package connector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Deleted is what the broker says about offsets [From, LogStart) of a
// partition that retention deleted before a reader got to them.
type Deleted int

const (
	// DeletedCommitted: nothing shows that the offsets held only aborted
	// records, so committed records may be among them: a loss.
	DeletedCommitted Deleted = iota
	// DeletedAborted: the offsets lie inside aborted transactions that
	// began at or before From and ended after the log start, and every
	// record the log still holds up to their abort markers belongs to an
	// aborted transaction.
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
// from, and every record from the log start up to their abort markers is a
// record of an aborted transaction. That last check is what the broker can
// still show: a committed record of another producer inside the deleted
// part of the transaction's span would have left no trace, and a record of
// another producer in the retained part of the span is taken as the sign
// that there were such records, so the offsets are then a loss.
func (b *Broker) ClassifyDeleted(ctx context.Context, topic string, partition int32, from, logStart int64) (DeletedVerdict, error) {
	committed := DeletedVerdict{Deleted: DeletedCommitted}
	if from >= logStart {
		return DeletedVerdict{Deleted: DeletedAborted, Evidence: "nothing was deleted"}, nil
	}
	fail := func(err error) (DeletedVerdict, error) {
		return committed, fmt.Errorf("classify the deleted offsets [%d, %d) of %s/%d: %w", from, logStart, topic, partition, err)
	}
	r := &logReader{b: b, topic: topic, partition: partition, leader: -1}
	rp, _, err := r.fetchIsolated(ctx, logStart, 1)
	if err == nil && rp == nil {
		err = errors.New("the fetch was throttled")
	}
	if err == nil {
		err = kerr.ErrorForCode(rp.ErrorCode)
	}
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
	// must end with abort markers before any record that is not a record of
	// an aborted transaction.
	var (
		verdict   = committed
		ended     = map[int64]bool{}
		open      = map[int64]bool{} // transactional producers with records and no marker yet
		firstData = true
	)
	err = b.ReadLog(ctx, topic, partition, logStart, rp.HighWatermark, func(rec *kgo.Record, _ int64) bool {
		if rec.Attrs.IsControl() {
			delete(open, rec.ProducerID)
			if commit, known := MarkerType(rec.Key); spanning[rec.ProducerID] && known && !commit {
				ended[rec.ProducerID] = true
				if len(ended) == len(spanning) {
					verdict = DeletedVerdict{Deleted: DeletedAborted, Evidence: describeSpanning(spanning, aborted, rec.Offset)}
					return false
				}
			}
			return true
		}
		if len(spanning) == 0 {
			// No aborted transaction reaches back to from: only an open one
			// at the log start leaves the question open.
			if firstData && rec.Attrs.IsTransactional() {
				open[rec.ProducerID] = true
			}
			firstData = false
			return len(open) > 0
		}
		if _, ok := aborted[rec.ProducerID]; !ok || !rec.Attrs.IsTransactional() {
			verdict.Evidence = fmt.Sprintf("offset %d, before the abort marker of the transaction spanning the deleted offsets, holds a record of producer %d, which was not aborted", rec.Offset, rec.ProducerID)
			return false
		}
		return true
	})
	if err != nil {
		return fail(err)
	}
	if len(spanning) == 0 && len(open) > 0 && rp.LastStableOffset < rp.HighWatermark {
		ids := slices.Sorted(maps.Keys(open))
		return DeletedVerdict{Deleted: DeletedUndecided, Evidence: fmt.Sprintf("an open transaction of producer %d holds the log start", ids[0])}, nil
	}
	return verdict, nil
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
