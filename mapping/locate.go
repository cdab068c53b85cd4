package mapping

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Status says where an offset stands in a table's ledger.
type Status string

const (
	// StatusCovered: a range of a commit consumed the offset. The offset
	// produced a row, or it was a transaction marker, an aborted record or
	// a compacted-away offset; which of these only the data (or the broker)
	// can tell.
	StatusCovered Status = "covered"
	// StatusLost: the offset lies in a range recorded as lost to retention.
	StatusLost Status = "lost"
	// StatusAborted: the offset lies in a range that retention deleted
	// before it was sunk and that held only aborted records.
	StatusAborted Status = "aborted"
	// StatusUnsunk: no range covers the offset: it is below the
	// partition's first sunk offset, in a gap, or at or past its next
	// offset.
	StatusUnsunk Status = "unsunk"
)

// Location is the ledger's answer for one position.
type Location struct {
	TopicPartition
	Offset int64
	Status Status
	// Commit and Range hold the offset when Status is covered or lost.
	Commit Commit
	Range  Range
	// Known is false when the ledger never mentions the partition. First
	// and Next are the partition's coverage otherwise, which places an
	// unsunk offset: below First, in a gap, or at or past Next.
	Known       bool
	First, Next int64
}

// Where locates one position in the ledger.
func (l Ledger) Where(tp TopicPartition, offset int64) Location {
	loc := Location{TopicPartition: tp, Offset: offset, Status: StatusUnsunk}
	rs := l.Ranges(tp)
	if len(rs) > 0 {
		c := Cover(rs)
		loc.Known, loc.First, loc.Next = true, c.First, c.Next
	}
	if c, r, ok := l.Locate(tp, offset); ok {
		loc.Commit, loc.Range = c, r
		loc.Status = StatusCovered
		switch {
		case r.Lost:
			loc.Status = StatusLost
		case r.Aborted:
			loc.Status = StatusAborted
		}
	}
	return loc
}

// Cut is a position vector: per partition, the offset below which records
// belong to the table "as of" the cut. Partitions the cut does not name are
// unconstrained.
type Cut map[TopicPartition]int64

// Below reports whether a row at offset of tp lies below the cut.
func (c Cut) Below(tp TopicPartition, offset int64) bool {
	o, ok := c[tp]
	return !ok || offset < o
}

func (c Cut) String() string {
	parts := make([]string, 0, len(c))
	for _, tp := range slices.SortedFunc(maps.Keys(c), TopicPartition.Compare) {
		parts = append(parts, fmt.Sprintf("%s=%d", tp, c[tp]))
	}
	return strings.Join(parts, ",")
}

// ParseCut parses a position vector "TOPIC/PARTITION=OFFSET[,...]". Items
// written "PARTITION=OFFSET" take defaultTopic, which must then be set.
func ParseCut(s, defaultTopic string) (Cut, error) {
	c := Cut{}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty position list: want TOPIC/PARTITION=OFFSET[,...]")
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		pos, off, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("position %q: want TOPIC/PARTITION=OFFSET", item)
		}
		tp := TopicPartition{Topic: defaultTopic}
		part := pos
		if i := strings.LastIndexByte(pos, '/'); i >= 0 {
			tp.Topic, part = pos[:i], pos[i+1:]
		}
		if tp.Topic == "" {
			return nil, fmt.Errorf("position %q: no topic; want TOPIC/PARTITION=OFFSET", item)
		}
		if !topicName.MatchString(tp.Topic) {
			return nil, fmt.Errorf("position %q: %q is not a legal Kafka topic name", item, tp.Topic)
		}
		p, err := strconv.ParseInt(part, 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("position %q: partition %q is not a partition number", item, part)
		}
		tp.Partition = int32(p)
		o, err := strconv.ParseInt(off, 10, 64)
		if err != nil || o < 0 {
			return nil, fmt.Errorf("position %q: offset %q is not an offset", item, off)
		}
		if _, dup := c[tp]; dup {
			return nil, fmt.Errorf("position %q: %s given twice", item, tp)
		}
		c[tp] = o
	}
	return c, nil
}

// NotCoveredError reports a position the ledger does not reach: the table
// has not (yet) sunk the offsets below it.
type NotCoveredError struct {
	Partition TopicPartition
	Offset    int64
	// Known is false when the ledger never mentions the partition; Next is
	// where the ledger ends otherwise.
	Known bool
	Next  int64
}

func (e *NotCoveredError) Error() string {
	if !e.Known {
		return fmt.Sprintf("the table has nothing of %s, so it never reached offset %d", e.Partition, e.Offset)
	}
	return fmt.Sprintf("the table has sunk %s only up to offset %d, not up to %d", e.Partition, e.Next, e.Offset)
}

// FirstCovering returns the first commit at which every position of the cut
// is covered: for each partition, the ledger up to that commit reaches the
// cut's offset, so every record below the cut is in that commit's snapshot.
// A cut at or below a partition's first sunk offset is covered from the
// first commit on (the table never held anything of it below the cut).
// Where the ledger never reaches a position, the error is a
// *NotCoveredError.
func (l Ledger) FirstCovering(cut Cut) (Commit, error) {
	need, err := CoverageNeeded(l.Summarize(), cut)
	if err != nil {
		return Commit{}, err
	}
	next := map[TopicPartition]int64{}
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			next[r.TopicPartition] = max(next[r.TopicPartition], r.High)
		}
		if reaches(next, need) {
			return c, nil
		}
	}
	// Unreachable: every needed offset is at most the partition's Next.
	return Commit{}, fmt.Errorf("no commit covers %s", cut)
}

// reaches reports whether next is at or past every offset of need.
func reaches(next, need map[TopicPartition]int64) bool {
	for tp, o := range need {
		if next[tp] < o {
			return false
		}
	}
	return true
}

// CoverageNeeded returns, for FirstCovering, the offset the ledger
// summarised by s must reach in each partition of the cut that is not
// trivially covered (at or below its first sunk offset), or a
// *NotCoveredError where the ledger never reaches the cut.
func CoverageNeeded(s Summary, cut Cut) (map[TopicPartition]int64, error) {
	if len(cut) == 0 {
		return nil, fmt.Errorf("no positions given")
	}
	if s.Commits == 0 {
		return nil, fmt.Errorf("the table has no floe commits yet")
	}
	need := map[TopicPartition]int64{}
	for tp, o := range cut {
		p, ok := s.Partition(tp)
		if !ok {
			if o > 0 {
				return nil, &NotCoveredError{Partition: tp, Offset: o}
			}
			continue
		}
		if o > p.Next() {
			return nil, &NotCoveredError{Partition: tp, Offset: o, Known: true, Next: p.Next()}
		}
		if o > p.First() {
			need[tp] = o
		}
	}
	return need, nil
}

// baseOf checks that the ledger summarised by s reaches every position
// of cut (a *NotCoveredError when not) and returns where each of its
// partitions stands before any commit: at the cut, or at the partition's
// first sunk offset when that is below it (offsets below it were never the
// table's).
func baseOf(s Summary, cut Cut) (Cut, error) {
	if _, err := CoverageNeeded(s, cut); err != nil {
		return nil, err
	}
	base := Cut{}
	for tp, o := range cut {
		base[tp] = o
		if p, ok := s.Partition(tp); ok {
			base[tp] = min(o, p.First())
		}
	}
	return base, nil
}

// Boundary is where a table that holds state (an upsert table) stood as of
// a cut. Such a table changes only commit by commit: the state inside a
// commit's range never was a table, so the state as of a cut is the state
// at the last commit boundary at or below it.
type Boundary struct {
	// Commit is the commit whose snapshot holds the state. It is the zero
	// Commit when Empty.
	Commit Commit
	// Empty is set when no commit lies wholly below the cut: the state then
	// is the empty table, before the first commit.
	Empty bool
	// At is, per partition of the cut, the offset the state reached: the
	// cut's own offset where the cut is a commit boundary (or at or below
	// the partition's first sunk offset), else the boundary below it.
	At Cut
	// Next is the first commit past the boundary, which reaches past the
	// cut in some partition; set when At differs from the cut.
	Next *Commit
}

// Exact reports whether the state is the table exactly at the cut.
func (b Boundary) Exact(cut Cut) bool {
	for tp, o := range cut {
		if b.At[tp] != o {
			return false
		}
	}
	return true
}

// StateAt returns the last commit boundary at or below cut: the longest
// prefix of the ledger none of whose ranges of a partition the cut names
// reaches past the cut's offset, and of that prefix the first commit at
// which the cut's partitions stood where they stand at its end (so a cut
// that is a commit boundary gets FirstCovering's commit). Partitions the
// cut does not name are unconstrained. A cut the ledger does not reach is
// a *NotCoveredError, as for FirstCovering.
func (l Ledger) StateAt(cut Cut) (Boundary, error) {
	f, err := NewStateFinder(l.Summarize(), cut)
	if err != nil {
		return Boundary{}, err
	}
	for _, c := range l.Commits {
		if !f.Add(c) {
			break
		}
	}
	return f.Boundary(), nil
}

// StateFinder finds Ledger.StateAt's boundary in a ledger read in order,
// commit by commit (Add) or, where no commit of a run reaches past the cut,
// by the run's summary (Pass): a reader of an archived ledger then reads
// the block that reaches past the cut, and the one that last moved the
// cut's partitions before it (Resume), not the ledger.
type StateFinder struct {
	cut Cut
	b   Boundary
	// pending is set when a run passed by its summary moved the cut's
	// partitions (or held the first commit): the boundary's commit is
	// in it, not b.Commit.
	pending bool
	done    bool
}

// NewStateFinder starts a search for the boundary at or below cut in the
// ledger summarised by s; a cut the ledger does not reach is a
// *NotCoveredError.
func NewStateFinder(s Summary, cut Cut) (*StateFinder, error) {
	base, err := baseOf(s, cut)
	if err != nil {
		return nil, err
	}
	return &StateFinder{cut: cut, b: Boundary{At: base, Empty: true}}, nil
}

// Add folds the next commit of the ledger. It returns false once a commit
// reached past the cut: the boundary is found, and no more are needed.
func (f *StateFinder) Add(c Commit) bool {
	if f.done {
		return false
	}
	if reachesPast(c, f.cut) {
		if !f.b.Exact(f.cut) {
			f.b.Next = &c
		}
		f.done = true
		return false
	}
	// The boundary's commit is the first at which the cut's partitions
	// stood where they stand at the end: the last commit that moved one
	// of them (or the first commit, if none did).
	moved := f.b.Empty
	for _, r := range c.Ranges {
		if _, named := f.cut[r.TopicPartition]; named && r.Len() > 0 && r.High > f.b.At[r.TopicPartition] {
			f.b.At[r.TopicPartition] = r.High
			moved = true
		}
	}
	if moved {
		f.b.Commit, f.pending = c, false
	}
	f.b.Empty = false
	return true
}

// Pass folds the next commits of the ledger by their summary s when none
// of them reaches past the cut, and reports whether it did; when it did
// not, the caller gives them to Add (or the summaries of smaller runs to
// Pass). moved reports whether they moved the cut's partitions (or held
// the ledger's first commit): the boundary's commit may be among them,
// and Pending says so until a later commit moves them again.
func (f *StateFinder) Pass(s Summary) (passed, moved bool) {
	if f.done || s.Commits == 0 {
		return !f.done, false
	}
	for tp, o := range f.cut {
		if p, ok := s.Partition(tp); ok && p.MaxHigh > o {
			return false, false
		}
	}
	moved = f.b.Empty
	for tp := range f.cut {
		if p, ok := s.Partition(tp); ok && p.MaxHigh > f.b.At[tp] {
			f.b.At[tp] = p.MaxHigh
			moved = true
		}
	}
	if moved {
		f.pending = true
	}
	f.b.Empty = false
	return true, moved
}

// Pending reports whether the boundary's commit is in the last run Pass
// folded that moved the cut's partitions: Resume, from the state before
// that run, and Add its commits, find it.
func (f *StateFinder) Pending() bool { return f.pending }

// State is where the search stands, to Resume from: the offsets reached
// and whether any commit was folded.
func (f *StateFinder) State() (at Cut, empty bool) { return maps.Clone(f.b.At), f.b.Empty }

// Resume returns a search of f's cut standing at a state State returned,
// to read again a run Pass folded: once Add has folded the run's commits,
// Settle takes the boundary's commit from it.
func (f *StateFinder) Resume(at Cut, empty bool) *StateFinder {
	return &StateFinder{cut: f.cut, b: Boundary{At: maps.Clone(at), Empty: empty}}
}

// Settle takes the boundary's commit from r, a Resume of f that has read
// again the run Pass folded last that moved the cut's partitions.
func (f *StateFinder) Settle(r *StateFinder) {
	f.b.Commit, f.pending = r.b.Commit, false
}

// Boundary returns the boundary found: after Add returned false, or after
// the whole ledger was folded.
func (f *StateFinder) Boundary() Boundary { return f.b }

// reachesPast reports whether a range of c of a partition cut names
// reaches past the cut's offset.
func reachesPast(c Commit, cut Cut) bool {
	for _, r := range c.Ranges {
		if o, named := cut[r.TopicPartition]; named && r.Len() > 0 && r.High > o {
			return true
		}
	}
	return false
}
