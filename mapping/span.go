package mapping

import (
	"cmp"
	"maps"
	"slices"
)

// CommitRange is one range of the ledger with the snapshot that committed
// it.
type CommitRange struct {
	SnapshotID int64
	Range
}

// SpanIndex finds the ledger ranges a compacted data file spans. A file
// that floe's compaction wrote holds the rows of several files of one
// Kafka partition, so its offset bounds cover several ranges, usually of
// several commits; the file-level audit and the compaction's planner place
// it on the chain of ranges its bounds cover (Span).
type SpanIndex struct {
	// parts holds each partition's non-empty ranges, sorted by offset.
	parts map[TopicPartition][]CommitRange
}

// SpanIndex indexes the ledger's ranges for Span.
func (l Ledger) SpanIndex() SpanIndex {
	ix := SpanIndex{parts: map[TopicPartition][]CommitRange{}}
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			if r.Len() > 0 {
				ix.parts[r.TopicPartition] = append(ix.parts[r.TopicPartition], CommitRange{SnapshotID: c.SnapshotID, Range: r})
			}
		}
	}
	for _, rs := range ix.parts {
		slices.SortFunc(rs, func(a, b CommitRange) int {
			return cmp.Or(cmp.Compare(a.Low, b.Low), cmp.Compare(a.High, b.High))
		})
	}
	return ix
}

// Span returns the ranges of tp that together hold the offsets iv (a
// file's offset bounds, [min, max+1)), in offset order: ranges that are
// not lost or aborted, each starting where the one before ends, the first
// holding iv.Low and the last iv.High-1. It returns false when there is no
// such chain: iv reaches offsets of a gap, of a lost or aborted range (no
// row can be there, and a file spanning one could hide rows in it from
// the file-level audit), or outside the ledger, or the chain's ranges
// overlap (overlaps are the ledger level's finding). An empty iv spans
// nothing.
func (ix SpanIndex) Span(tp TopicPartition, iv Interval) ([]CommitRange, bool) {
	if iv.Len() <= 0 {
		return nil, false
	}
	rs := ix.parts[tp]
	// The first range ending after iv.Low; ranges are sorted by Low and,
	// where they do not overlap, by High too.
	i, _ := slices.BinarySearchFunc(rs, iv.Low, func(r CommitRange, low int64) int {
		if r.High <= low {
			return -1
		}
		return 1
	})
	var out []CommitRange
	next := iv.Low
	for ; i < len(rs) && rs[i].Low < iv.High; i++ {
		r := rs[i]
		if r.Deleted() || r.Low > next || (len(out) > 0 && r.Low != next) {
			return nil, false
		}
		out = append(out, r)
		next = r.High
	}
	if len(out) == 0 || next < iv.High {
		return nil, false
	}
	return out, true
}

// Partitions returns every partition with a non-empty range, sorted.
func (ix SpanIndex) Partitions() []TopicPartition {
	return slices.SortedFunc(maps.Keys(ix.parts), TopicPartition.Compare)
}
