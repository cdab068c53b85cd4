package mapping

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// PartitionSummary is what the ranges of one partition say about it,
// folded in commit order without keeping them: a writer resumes from it
// and a lookup finds which part of a long ledger can hold an offset. Its
// counts are those of Cover over the same ranges.
type PartitionSummary struct {
	// Low and High span every range of the partition, empty ones included:
	// no range lies outside [Low, High).
	Low  int64 `json:"low"`
	High int64 `json:"high"`
	// MaxHigh is the highest High of a non-empty range, -1 when none.
	MaxHigh     int64 `json:"max-high"`
	Ranges      int   `json:"ranges"`
	Records     int64 `json:"records"`
	DeadLetters int64 `json:"dead-letters,omitempty"`
	// Deletes and Skipped are the ranges' counts of an upsert table
	// (Range.Deletes, Range.Skipped).
	Deletes int64 `json:"deletes,omitempty"`
	Skipped int64 `json:"skipped,omitempty"`
	// StartLow, StartHigh and Started describe the lowest range (by Low,
	// then High), which tells whether the ledger records where the
	// partition began (Coverage.Started).
	StartLow  int64 `json:"start-low"`
	StartHigh int64 `json:"start-high"`
	Started   bool  `json:"started,omitempty"`
	// LastCommit is the commit time (Unix milliseconds) of the last commit
	// that advanced the partition: with a range of offsets, not a start
	// alone (0 when none did: a partition another process sinks, whose
	// start a pipeline of other partitions recorded, showed a last commit
	// that never touched it).
	LastCommit int64 `json:"last-commit"`
	// Written is set when some range produced rows or dead letters;
	// OnlyDeadLetters then tells whether the last such range produced no
	// row.
	Written         bool `json:"written,omitempty"`
	OnlyDeadLetters bool `json:"only-dead-letters,omitempty"`
	// Tiled is set when the ranges, in the order summed, each start where
	// the one before ended and none is lost or aborted: they tile [Low,
	// High) exactly, so a reader checking chains of offsets (Chains) may
	// take the span for them (Chains.MeetTiled). Summaries written before
	// it read as not tiled.
	Tiled bool `json:"tiled,omitempty"`
}

// First is the lowest offset the partition's ranges cover (Coverage.First).
func (p PartitionSummary) First() int64 { return p.Low }

// Next is the offset after the highest one the ranges cover: where a
// writer resumes (Coverage.Next).
func (p PartitionSummary) Next() int64 { return max(p.Low, p.MaxHigh) }

// Span is [Low, High): every range of the partition lies in it.
func (p PartitionSummary) Span() Interval { return Interval{p.Low, p.High} }

func (p *PartitionSummary) add(r Range, at int64) {
	started := r.IsStart() || (r.Lost && r.Low == 0)
	switch {
	case p.Ranges == 0 || r.Low < p.StartLow || (r.Low == p.StartLow && r.High < p.StartHigh):
		p.StartLow, p.StartHigh, p.Started = r.Low, r.High, started
	case r.Low == p.StartLow && r.High == p.StartHigh:
		// Of equal lowest ranges (an overlap), any one that records
		// the start does.
		p.Started = p.Started || started
	}
	if p.Ranges == 0 {
		p.Low, p.High, p.MaxHigh, p.Tiled = r.Low, r.High, -1, !r.Deleted()
	} else {
		p.Tiled = p.Tiled && !r.Deleted() && r.Low == p.High
	}
	p.Low, p.High = min(p.Low, r.Low), max(p.High, r.High)
	if r.Len() > 0 {
		p.MaxHigh = max(p.MaxHigh, r.High)
	}
	p.Ranges++
	p.Records += r.Records
	p.DeadLetters += r.DeadLetters
	p.Deletes += r.Deletes
	p.Skipped += r.Skipped
	if r.Len() > 0 {
		p.LastCommit = at
	}
	if r.Records > 0 || r.DeadLetters > 0 || r.Deletes > 0 {
		p.Written, p.OnlyDeadLetters = true, r.Records == 0 && r.Deletes == 0
	}
}

// merge folds q, the summary of ranges committed after p's, into p.
func (p *PartitionSummary) merge(q PartitionSummary) {
	if q.Ranges == 0 {
		return
	}
	if p.Ranges == 0 {
		*p = q
		return
	}
	switch {
	case q.StartLow < p.StartLow || (q.StartLow == p.StartLow && q.StartHigh < p.StartHigh):
		p.StartLow, p.StartHigh, p.Started = q.StartLow, q.StartHigh, q.Started
	case q.StartLow == p.StartLow && q.StartHigh == p.StartHigh:
		p.Started = p.Started || q.Started
	}
	p.Tiled = p.Tiled && q.Tiled && q.Low == p.High
	p.Low, p.High, p.MaxHigh = min(p.Low, q.Low), max(p.High, q.High), max(p.MaxHigh, q.MaxHigh)
	p.Ranges += q.Ranges
	p.Records += q.Records
	p.DeadLetters += q.DeadLetters
	p.Deletes += q.Deletes
	p.Skipped += q.Skipped
	if q.LastCommit != 0 {
		p.LastCommit = q.LastCommit
	}
	if q.Written {
		p.Written, p.OnlyDeadLetters = true, q.OnlyDeadLetters
	}
}

// Summary is a ledger folded in commit order into what its readers need
// without its ranges: per partition a PartitionSummary, and per topic the
// topic IDs recorded. Its size is set by the partitions and topics, not
// by the number of commits, so a writer keeps it for the life of a table
// and the ledger archive keeps one per block of entries. The zero value
// is the summary of an empty ledger.
type Summary struct {
	// Commits is the number of commits folded.
	Commits int `json:"commits"`
	// Parts summarises each partition.
	Parts map[TopicPartition]*PartitionSummary `json:"-"`
	// IDs are, per topic, the distinct topic IDs recorded, in the order
	// they first appear; LatestID the one the latest commit recording one
	// named.
	IDs      map[string][]string `json:"topic-ids,omitempty"`
	LatestID map[string]string   `json:"latest-topic-ids,omitempty"`
	// Unidentified are the topics some commit read ranges of without
	// recording a topic ID (a floe before ledger version 2, or brokers
	// without topic IDs): a recreation of such a topic before its first
	// recorded ID cannot be seen. Summaries archived before it was kept
	// do not have it.
	Unidentified map[string]bool `json:"unidentified-topics,omitempty"`
}

// Summarize folds a ledger.
func (l Ledger) Summarize() Summary {
	var s Summary
	for _, c := range l.Commits {
		s.Add(c)
	}
	return s
}

// Add folds the next commit into s.
func (s *Summary) Add(c Commit) {
	s.Commits++
	at := c.CommittedAt.UnixMilli()
	if s.Parts == nil {
		s.Parts = map[TopicPartition]*PartitionSummary{}
	}
	for _, r := range c.Ranges {
		p := s.Parts[r.TopicPartition]
		if p == nil {
			p = &PartitionSummary{}
			s.Parts[r.TopicPartition] = p
		}
		p.add(r, at)
	}
	for _, topic := range slices.Sorted(maps.Keys(c.TopicIDs)) {
		s.addID(topic, c.TopicIDs[topic])
	}
	for _, r := range c.Ranges {
		if c.TopicIDs[r.Topic] == "" {
			if s.Unidentified == nil {
				s.Unidentified = map[string]bool{}
			}
			s.Unidentified[r.Topic] = true
		}
	}
}

func (s *Summary) addID(topic, id string) {
	if id == "" {
		return
	}
	if s.IDs == nil {
		s.IDs, s.LatestID = map[string][]string{}, map[string]string{}
	}
	if !slices.Contains(s.IDs[topic], id) {
		s.IDs[topic] = append(s.IDs[topic], id)
	}
	s.LatestID[topic] = id
}

// Clone returns a copy of s that folding into does not change s.
func (s Summary) Clone() Summary {
	out := Summary{Commits: s.Commits, IDs: maps.Clone(s.IDs), LatestID: maps.Clone(s.LatestID), Unidentified: maps.Clone(s.Unidentified)}
	for topic, ids := range out.IDs {
		out.IDs[topic] = slices.Clone(ids)
	}
	if s.Parts != nil {
		out.Parts = make(map[TopicPartition]*PartitionSummary, len(s.Parts))
		for tp, p := range s.Parts {
			q := *p
			out.Parts[tp] = &q
		}
	}
	return out
}

// Merge folds o, the summary of commits made after s's, into s.
func (s *Summary) Merge(o Summary) {
	s.Commits += o.Commits
	if len(o.Parts) > 0 && s.Parts == nil {
		s.Parts = make(map[TopicPartition]*PartitionSummary, len(o.Parts))
	}
	for tp, q := range o.Parts {
		p := s.Parts[tp]
		if p == nil {
			p = &PartitionSummary{}
			s.Parts[tp] = p
		}
		p.merge(*q)
	}
	for _, topic := range slices.Sorted(maps.Keys(o.IDs)) {
		for _, id := range o.IDs[topic] {
			s.addID(topic, id)
		}
		s.LatestID[topic] = o.LatestID[topic]
	}
	for topic := range o.Unidentified {
		if s.Unidentified == nil {
			s.Unidentified = map[string]bool{}
		}
		s.Unidentified[topic] = true
	}
}

// Partition returns the summary of tp, and false when no range of the
// ledger is of tp.
func (s Summary) Partition(tp TopicPartition) (PartitionSummary, bool) {
	p := s.Parts[tp]
	if p == nil {
		return PartitionSummary{}, false
	}
	return *p, true
}

// Partitions returns every partition the ledger mentions, sorted.
func (s Summary) Partitions() []TopicPartition {
	return slices.SortedFunc(maps.Keys(s.Parts), TopicPartition.Compare)
}

// Topics returns the topics of every partition the ledger mentions, sorted.
func (s Summary) Topics() []string { return topicsOf(s.Partitions()) }

// TopicsWithRecords returns, sorted, the topics of which a partition counts
// a record that became a row.
func (s Summary) TopicsWithRecords() []string {
	var tps []TopicPartition
	for _, tp := range s.Partitions() {
		if s.Parts[tp].Records > 0 {
			tps = append(tps, tp)
		}
	}
	return topicsOf(tps)
}

// HeldFirst returns, per partition, where the ledger's own records begin:
// its first offset moved past the lost ranges (lost, per partition) that
// begin its coverage (PastLeadingLost).
func (s Summary) HeldFirst(lost map[TopicPartition][]Interval) map[TopicPartition]int64 {
	held := make(map[TopicPartition]int64, len(s.Parts))
	for tp, p := range s.Parts {
		held[tp] = PastLeadingLost(p.First(), lost[tp])
	}
	return held
}

// Next returns, per partition, the offset after the highest one the ledger
// covers: where a writer resumes (Ledger.Next).
func (s Summary) Next() map[TopicPartition]int64 {
	next := make(map[TopicPartition]int64, len(s.Parts))
	for tp, p := range s.Parts {
		next[tp] = p.High
	}
	return next
}

// TopicID is Ledger.TopicID.
func (s Summary) TopicID(topic string) string { return s.LatestID[topic] }

// TopicIDs is Ledger.TopicIDs.
func (s Summary) TopicIDs(topic string) []string { return slices.Clone(s.IDs[topic]) }

// LastCommitAt is the commit time of the last commit that advanced the
// partition (LastCommit), the zero time when none did.
func (p PartitionSummary) LastCommitAt() time.Time {
	if p.LastCommit == 0 {
		return time.Time{}
	}
	return time.UnixMilli(p.LastCommit).UTC()
}

// Coverer computes a partition's Coverage from its ranges given one at a
// time, in any order, keeping the covered, overlapping, lost and aborted
// offsets as merged intervals rather than the ranges: its size is set by
// the number of anomalies, not of ranges. Coverage() equals Cover over the
// ranges added. It also keeps, for the audit's rows and content levels,
// the offsets rows may be at (Kept) and those ranges with dead letters
// cover (WithDeadLetters), so that they need not hold the ranges either.
type Coverer struct {
	sum                         PartitionSummary
	covered, overlaps, lost, ab []Interval
	kept, dead                  []Interval
}

// Add adds one range of the partition.
func (cv *Coverer) Add(r Range) {
	cv.sum.add(r, 0)
	if r.Len() <= 0 {
		return
	}
	if r.Lost {
		cv.lost = insertMerged(cv.lost, r.Interval)
	}
	if r.Aborted {
		cv.ab = insertMerged(cv.ab, r.Interval)
	}
	if !r.Deleted() {
		cv.kept = insertMerged(cv.kept, r.Interval)
	}
	if r.DeadLetters > 0 {
		cv.dead = insertMerged(cv.dead, r.Interval)
	}
	// The offsets of r already covered are covered twice now. Ranges
	// usually arrive in order, past everything covered: no search.
	if n := len(cv.covered); n > 0 && r.Low < cv.covered[n-1].High {
		i, _ := slices.BinarySearchFunc(cv.covered, r.Low, func(iv Interval, o int64) int { return cmp.Compare(iv.High, o+1) })
		for ; i < len(cv.covered) && cv.covered[i].Low < r.High; i++ {
			iv := cv.covered[i]
			cv.overlaps = insertMerged(cv.overlaps, Interval{max(iv.Low, r.Low), min(iv.High, r.High)})
		}
	}
	cv.covered = insertMerged(cv.covered, r.Interval)
}

// Coverage returns the coverage of the ranges added.
func (cv *Coverer) Coverage() Coverage {
	s := cv.sum
	if s.Ranges == 0 {
		return Coverage{}
	}
	c := Coverage{First: s.Low, Next: s.Next(), Ranges: s.Ranges, Records: s.Records, DeadLetters: s.DeadLetters, Deletes: s.Deletes, Skipped: s.Skipped, Started: s.Started,
		Overlaps: slices.Clone(cv.overlaps), Lost: slices.Clone(cv.lost), Aborted: slices.Clone(cv.ab)}
	at := c.First
	for _, iv := range cv.covered {
		if iv.Low > at {
			c.Gaps = append(c.Gaps, Interval{at, iv.Low})
		}
		at = max(at, iv.High)
	}
	return c
}

// Kept returns the merged, sorted offsets the ranges added that are
// neither lost nor aborted cover: where the partition's rows may be.
func (cv *Coverer) Kept() []Interval { return cv.kept }

// WithDeadLetters returns the merged, sorted offsets the ranges added that
// count dead letters cover: where the partition's dead letters may be.
func (cv *Coverer) WithDeadLetters() []Interval { return cv.dead }

// insertMerged inserts iv into a sorted list of disjoint intervals, merging
// it with those it overlaps or touches (as appendMerged does).
func insertMerged(ivs []Interval, iv Interval) []Interval {
	if n := len(ivs); n == 0 || iv.Low > ivs[n-1].High {
		return append(ivs, iv)
	}
	// First interval that iv touches or lies before.
	i, _ := slices.BinarySearchFunc(ivs, iv.Low, func(x Interval, o int64) int { return cmp.Compare(x.High, o) })
	j := i
	for j < len(ivs) && ivs[j].Low <= iv.High {
		iv.Low, iv.High = min(iv.Low, ivs[j].Low), max(iv.High, ivs[j].High)
		j++
	}
	return slices.Replace(ivs, i, j, iv)
}
