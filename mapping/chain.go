package mapping

import (
	"cmp"
	"iter"
	"slices"
)

// Chain is the offsets of a partition that a file floe's compaction wrote
// says it holds (its bounds, or a span of its file group), and what the
// ledger ranges that meet them (non-empty, High > Low of the offsets, Low <
// their High) showed: the offsets those ranges cover, merged, and whether
// one of them is lost or aborted, or two overlap. Such a file holds the
// rows of several files of the sink, so its offsets cover several ranges,
// usually of several commits; it is placed on the ledger when they lie on
// one unbroken chain of ranges (OK). A Chain is fed the ranges in one
// streamed pass over the ledger (Chains.Meet), in any order, so a reader
// holds per chain an interval or two, not the ledger.
type Chain struct {
	TopicPartition
	// Offsets are the offsets asked about, [min, max+1).
	Offsets Interval
	covered []Interval
	broken  bool
}

// meet records a ledger range that meets c's offsets.
func (c *Chain) meet(r Range) {
	if r.Deleted() {
		c.broken = true
		return
	}
	iv := r.Interval
	i, _ := slices.BinarySearchFunc(c.covered, iv.Low, func(x Interval, low int64) int { return cmp.Compare(x.Low, low) })
	if (i > 0 && c.covered[i-1].High > iv.Low) || (i < len(c.covered) && c.covered[i].Low < iv.High) {
		c.broken = true
		return
	}
	switch joinPrev, joinNext := i > 0 && c.covered[i-1].High == iv.Low, i < len(c.covered) && c.covered[i].Low == iv.High; {
	case joinPrev && joinNext:
		c.covered[i-1].High = c.covered[i].High
		c.covered = slices.Delete(c.covered, i, i+1)
	case joinPrev:
		c.covered[i-1].High = iv.High
	case joinNext:
		c.covered[i].Low = iv.Low
	default:
		c.covered = slices.Insert(c.covered, i, iv)
	}
}

// OK reports whether c's offsets lie on one unbroken chain of ranges:
// ranges that are not lost or aborted, each starting where another ends,
// one holding the lowest offset and one the highest. It is false when the
// offsets reach a gap, a lost or aborted range (no row can be there, and a
// file spanning one could hide rows in it from the file-level audit), or
// offsets outside the ledger, or when the ranges overlap (overlaps are the
// ledger level's finding). Empty offsets lie on no chain.
func (c *Chain) OK() bool {
	return c.Offsets.Len() > 0 && !c.broken && len(c.covered) == 1 && c.covered[0].Low <= c.Offsets.Low && c.covered[0].High >= c.Offsets.High
}

// Extent is the offsets of the chain's ranges, when OK: they hold the
// chain's offsets and may reach beyond them.
func (c *Chain) Extent() Interval {
	if len(c.covered) == 0 {
		return Interval{}
	}
	return c.covered[0]
}

// Chains checks chains (Chain) against a ledger streamed past it: Add
// each, Build, then Meet every range of the ledger. The audit's file
// level, compaction's planner and `floe files` place compacted files with
// it, in memory that follows the chains asked about, not the ledger's age.
type Chains struct {
	chains []Chain
	// byTP lists each partition's chains by Offsets.Low, and reach the
	// highest Offsets.High up to each of them.
	byTP  map[TopicPartition][]int
	reach map[TopicPartition][]int64
}

// Add adds a chain of tp's offsets iv and returns its index. Chains are
// added before Build.
func (x *Chains) Add(tp TopicPartition, iv Interval) int {
	x.chains = append(x.chains, Chain{TopicPartition: tp, Offsets: iv})
	return len(x.chains) - 1
}

// Len returns how many chains were added.
func (x *Chains) Len() int { return len(x.chains) }

// Chain returns the chain of index i.
func (x *Chains) Chain(i int) *Chain { return &x.chains[i] }

// Build indexes the chains added for Meet.
func (x *Chains) Build() {
	x.byTP, x.reach = map[TopicPartition][]int{}, map[TopicPartition][]int64{}
	for i, c := range x.chains {
		x.byTP[c.TopicPartition] = append(x.byTP[c.TopicPartition], i)
	}
	for tp, ids := range x.byTP {
		slices.SortFunc(ids, func(a, b int) int { return cmp.Compare(x.chains[a].Offsets.Low, x.chains[b].Offsets.Low) })
		reach := make([]int64, len(ids))
		for j, id := range ids {
			reach[j] = x.chains[id].Offsets.High
			if j > 0 {
				reach[j] = max(reach[j], reach[j-1])
			}
		}
		x.reach[tp] = reach
	}
}

// Meet records ledger range r on every chain it meets.
func (x *Chains) Meet(r Range) {
	x.Meeting(r, func(i int) { x.chains[i].meet(r) })
}

// Meeting calls fn with the index of every chain whose offsets r
// overlaps (touching at an end is not meeting); an empty r meets none.
func (x *Chains) Meeting(r Range, fn func(int)) {
	if r.Len() <= 0 {
		return
	}
	ids, reach := x.byTP[r.TopicPartition], x.reach[r.TopicPartition]
	// The chains starting before r ends; of those, walking down, only
	// while one of them (reach) still ends after r starts.
	j, _ := slices.BinarySearchFunc(ids, r.High, func(id int, high int64) int {
		if x.chains[id].Offsets.Low < high {
			return -1
		}
		return 1
	})
	for j--; j >= 0 && reach[j] > r.Low; j-- {
		if x.chains[ids[j]].Offsets.High > r.Low {
			fn(ids[j])
		}
	}
}

// InSummary reports whether ranges that a ledger summary sums up (a
// block of the archive) may meet a chain: whether a partition's span
// does. A pass skips the blocks it rejects.
func (x *Chains) InSummary(s Summary) bool {
	for _, tp := range s.Partitions() {
		ps, _ := s.Partition(tp)
		met := false
		x.Meeting(Range{TopicPartition: tp, Interval: ps.Span()}, func(int) { met = true })
		if met {
			return true
		}
	}
	return false
}

// MeetTiled meets the ranges a ledger summary sums up (a block of the
// archive) by their spans, without reading them, when it can: when every
// partition whose span meets a chain is Tiled, so that its span, as one
// range, meets the chains as its ranges would (Extent aside: it may reach
// further). It reports whether it did; when not, it met nothing, and the
// caller meets the ranges.
func (x *Chains) MeetTiled(s Summary) bool {
	var meet []Range
	for _, tp := range s.Partitions() {
		ps, _ := s.Partition(tp)
		r := Range{TopicPartition: tp, Interval: ps.Span()}
		met := false
		x.Meeting(r, func(int) { met = true })
		if !met {
			continue
		}
		if !ps.Tiled {
			return false
		}
		meet = append(meet, r)
	}
	for _, r := range meet {
		x.Meet(r)
	}
	return true
}

// PerPartition yields, for each partition with chains, their indexes
// sorted by the low end of their offsets (after Build).
func (x *Chains) PerPartition() iter.Seq[[]int] {
	return func(yield func([]int) bool) {
		for _, ids := range x.byTP {
			if !yield(ids) {
				return
			}
		}
	}
}
