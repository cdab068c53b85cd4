package mapping

import (
	"cmp"
	"fmt"
	"slices"
)

// TopicPartition names one partition of one topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Compare orders partitions by topic, then partition number.
func (tp TopicPartition) Compare(o TopicPartition) int {
	if c := cmp.Compare(tp.Topic, o.Topic); c != 0 {
		return c
	}
	return cmp.Compare(tp.Partition, o.Partition)
}

// Interval is a half-open offset interval [Low, High).
type Interval struct {
	Low, High int64
}

func (iv Interval) String() string { return fmt.Sprintf("[%d, %d)", iv.Low, iv.High) }

// Len is the number of offsets in the interval.
func (iv Interval) Len() int64 { return iv.High - iv.Low }

// Contains reports whether offset lies in the interval.
func (iv Interval) Contains(offset int64) bool { return iv.Low <= offset && offset < iv.High }

// Range is the half-open offset range [Low, High) of one partition that one
// commit consumed. High is the next offset to read, not the last one read.
// A range may contain offsets that produced no row (transaction markers,
// aborted records, compacted offsets), so Records counts the rows it produced
// and DeadLetters the records it sent to the dead-letter table instead (a
// typed table's records that could not be decoded): per range, rows + dead
// letters + offsets without a record = offsets.
//
// A lost range (Lost true) is one that retention deleted before it was sunk:
// it produced no rows, and the ledger records it so the loss is never silent.
//
// An aborted range (Aborted true) was deleted by retention before it was
// sunk too, but the broker showed that it held only aborted records (see
// connector.ClassifyDeleted): it produced no rows, and it is not a loss. The
// ledger records it apart from data ranges so that the judgement stays
// visible to an audit.
type Range struct {
	TopicPartition
	Interval
	// Records counts the range's records that became rows. In an upsert
	// table, a row a later record of its key superseded still counts.
	Records int64
	// DeadLetters counts records that went to the dead-letter table.
	DeadLetters int64
	// Deletes counts records that deleted their key in an upsert table
	// (tombstones, change events of deletes); Skipped records ignored on
	// purpose (the tombstone that follows a change event of a delete).
	Deletes, Skipped int64
	Lost             bool
	Aborted          bool
}

// Deleted reports whether retention deleted r's offsets before they were
// sunk (a lost or an aborted range): no row can be in it.
func (r Range) Deleted() bool { return r.Lost || r.Aborted }

// IsStart reports whether r is a start: an empty range that records where
// a writer began a partition the ledger did not have yet (its log start,
// its last stable offset for --start latest, or a replay's start offset),
// committed before anything of it was sunk. Data and lost ranges are never
// empty.
func (r Range) IsStart() bool { return !r.Deleted() && r.Len() == 0 }

func (r Range) String() string {
	switch {
	case r.Lost:
		return fmt.Sprintf("%s %s lost", r.TopicPartition, r.Interval)
	case r.Aborted:
		return fmt.Sprintf("%s %s deleted, aborted", r.TopicPartition, r.Interval)
	}
	s := fmt.Sprintf("%s %s %d records", r.TopicPartition, r.Interval, r.Records)
	if r.DeadLetters > 0 {
		s += fmt.Sprintf(", %d dead letters", r.DeadLetters)
	}
	if r.Deletes > 0 {
		s += fmt.Sprintf(", %d deletes", r.Deletes)
	}
	if r.Skipped > 0 {
		s += fmt.Sprintf(", %d skipped", r.Skipped)
	}
	return s
}

// SortRanges orders ranges by partition, then by low offset.
func SortRanges(rs []Range) {
	slices.SortFunc(rs, func(a, b Range) int {
		if c := a.TopicPartition.Compare(b.TopicPartition); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Low, b.Low); c != 0 {
			return c
		}
		return cmp.Compare(a.High, b.High)
	})
}

// Coverage is what a set of ranges of one partition says about it.
type Coverage struct {
	// First is the lowest offset covered, Next the offset after the highest.
	First, Next int64
	// Ranges is the number of ranges, Records, DeadLetters, Deletes and
	// Skipped the sums of their counts.
	Ranges           int
	Records          int64
	DeadLetters      int64
	Deletes, Skipped int64
	// Gaps are offsets between First and Next that no range covers.
	Gaps []Interval
	// Overlaps are offsets that more than one range covers.
	Overlaps []Interval
	// Lost are the offsets recorded as lost to retention.
	Lost []Interval
	// Aborted are the offsets recorded as deleted by retention and judged
	// to have held only aborted records.
	Aborted []Interval
	// Started is set when the ledger records where the partition began: a
	// start (Range.IsStart) at First, or a lost range from offset 0 (the
	// log's head was gone before the partition was first sunk). Without
	// it, offsets below First may have been skipped unnoticed.
	Started bool
}

// Cover computes the coverage of ranges, which must all belong to one
// partition. Empty ranges (Low == High) count as ranges but cover nothing.
func Cover(ranges []Range) Coverage {
	var c Coverage
	if len(ranges) == 0 {
		return c
	}
	rs := slices.Clone(ranges)
	SortRanges(rs)
	c.First, c.Next = rs[0].Low, rs[0].Low
	c.Started = rs[0].IsStart() || (rs[0].Lost && rs[0].Low == 0)
	for _, r := range rs {
		c.Ranges++
		c.Records += r.Records
		c.DeadLetters += r.DeadLetters
		c.Deletes += r.Deletes
		c.Skipped += r.Skipped
		if r.Lost && r.Len() > 0 {
			c.Lost = appendMerged(c.Lost, r.Interval)
		}
		if r.Aborted && r.Len() > 0 {
			c.Aborted = appendMerged(c.Aborted, r.Interval)
		}
		if r.Len() <= 0 {
			continue
		}
		if r.Low > c.Next {
			c.Gaps = append(c.Gaps, Interval{c.Next, r.Low})
		}
		if r.Low < c.Next {
			c.Overlaps = appendMerged(c.Overlaps, Interval{r.Low, min(r.High, c.Next)})
		}
		c.Next = max(c.Next, r.High)
	}
	return c
}

// PastLeadingLost returns first moved past the lost intervals (in any
// order) that begin a partition's coverage at it, chained: where the
// ledger's own records begin when its first ranges are lost. A published
// replay from earliest records as lost what retention deleted since main
// sank it, so main's history no longer reaches main's rows there.
func PastLeadingLost(first int64, lost []Interval) int64 {
	ivs := slices.SortedFunc(slices.Values(lost), func(a, b Interval) int { return cmp.Compare(a.Low, b.Low) })
	for _, iv := range ivs {
		if iv.Low <= first && first < iv.High {
			first = iv.High
		}
	}
	return first
}

// appendMerged appends iv to a sorted list of intervals, merging it with the
// last one when they touch.
func appendMerged(ivs []Interval, iv Interval) []Interval {
	if n := len(ivs); n > 0 && iv.Low <= ivs[n-1].High {
		ivs[n-1].High = max(ivs[n-1].High, iv.High)
		return ivs
	}
	return append(ivs, iv)
}

// Validate checks a range on its own: a valid partition and Low <= High,
// with no records in a lost range, and no more records (rows, dead
// letters, deletes and skipped records together) than offsets.
func (r Range) Validate() error {
	switch {
	case r.Topic == "":
		return fmt.Errorf("range %s: empty topic", r)
	case r.Partition < 0:
		return fmt.Errorf("range %s: negative partition", r)
	case r.Low < 0 || r.High < r.Low:
		return fmt.Errorf("range %s: bounds must satisfy 0 <= low <= high", r)
	case r.Records < 0 || r.DeadLetters < 0 || r.Deletes < 0 || r.Skipped < 0 || r.counted() > r.Len():
		return fmt.Errorf("range %s: records, dead letters, deletes and skipped records outside [0, %d]", r, r.Len())
	case r.Deleted() && r.counted() != 0:
		return fmt.Errorf("range %s: a deleted range has no records", r)
	case r.Lost && r.Aborted:
		return fmt.Errorf("range %s: lost and aborted at once", r)
	}
	return nil
}

// counted is the number of the range's offsets that held a record it
// accounts for: rows, dead letters, deletes and skipped records.
func (r Range) counted() int64 { return r.Records + r.DeadLetters + r.Deletes + r.Skipped }
