package audit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// groupOf returns the file group of floe commit c that lists path, and
// its index; ok false when the file is not in a group (it holds one
// partition, and its bounds place it).
func groupOf(c *mapping.Commit, path string) (g mapping.FileGroup, i int, ok bool) {
	for i, g := range c.FileGroups {
		if slices.Contains(g.Files, path) {
			return g, i, true
		}
	}
	return mapping.FileGroup{}, 0, false
}

// groupRanges returns the ranges of c with rows that group g's spans
// overlap: the ranges whose rows the group's files hold together.
func groupRanges(c *mapping.Commit, g mapping.FileGroup) []mapping.Range {
	var out []mapping.Range
	for _, r := range c.Ranges {
		if !r.Deleted() && g.Overlaps(r) {
			out = append(out, r)
		}
	}
	return out
}

// groupFile places live data file f of floe commit c, listed in c's file
// group g (index i): its rows count for the set of every range of c the
// group's spans cover, joined (so the files level compares all the
// group's files' rows with all those ranges' records). A span outside
// every range of c with rows is a stray file, reported once per group.
func (a *auditor) groupFile(c *mapping.Commit, g mapping.FileGroup, i int, f snapshot.DataFile, sets *rangeSets, strays map[[2]int64]bool) {
	rs := a.placeGroupFile(c, g, i, f, strays)
	if len(rs) == 0 {
		return
	}
	keys := make([]setKey, len(rs))
	for k, r := range rs {
		keys[k] = rangeNode(rangeKey{c.SnapshotID, r})
	}
	sets.add(f.Records, keys...)
}

// placeGroupFile checks live data file f of floe commit c's file group g
// (index i) against the group's spans, counts it as a file of the group's
// partitions, and returns the ranges of c the group holds rows of.
func (a *auditor) placeGroupFile(c *mapping.Commit, g mapping.FileGroup, i int, f snapshot.DataFile, strays map[[2]int64]bool) []mapping.Range {
	if k := [2]int64{c.SnapshotID, int64(i)}; !strays[k] {
		strays[k] = true
		for _, s := range (mapping.Commit{Ranges: c.Ranges, FileGroups: []mapping.FileGroup{g}}).SpansOutside() {
			a.find(Finding{Level: LevelFiles, Kind: KindStrayFile, Partition: s.TopicPartition, HasPartition: true,
				Offsets: s.Interval, HasOffsets: true, File: g.Files[0], SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("the file group of snapshot %d (%d files, first %s) says it holds rows of %s %s, which no range of that snapshot with rows covers",
					c.SnapshotID, len(g.Files), g.Files[0], s.TopicPartition, s.Interval)})
		}
	}
	a.outsideSpans(f, g.Spans, c.SnapshotID)
	rs := groupRanges(c, g)
	seen := map[mapping.TopicPartition]bool{}
	for _, r := range rs {
		if !seen[r.TopicPartition] && a.selected(r.Topic) {
			seen[r.TopicPartition] = true
			a.part(r.TopicPartition).Files++
		}
	}
	return rs
}

// outsideSpans reports, as a stray file, a live data file of a file group
// (added, or rewritten by a compaction, by snapshot id) whose manifest
// bounds reach past its group's spans: partitions none of them names, or
// offsets below or above all of them (of its partition, when it holds
// one). Its rows are then not all the group's, whatever their count; they
// still count for the group, so that the count findings stay about rows
// missing or extra. Bounds only bracket a file's rows: a file whose
// bounds lie within the spans may still hold rows between them, which the
// rows level finds.
func (a *auditor) outsideSpans(f snapshot.DataFile, spans []mapping.Span, id int64) {
	if !f.HasBounds || f.Records == 0 || len(spans) == 0 {
		return
	}
	var (
		pmin, pmax = spans[0].Partition, spans[0].Partition
		env        mapping.Interval
		found      bool
	)
	for _, s := range spans {
		pmin, pmax = min(pmin, s.Partition), max(pmax, s.Partition)
		if f.PartitionMin != f.PartitionMax || s.Partition == f.PartitionMin {
			if !found {
				env, found = s.Interval, true
			}
			env = mapping.Interval{Low: min(env.Low, s.Low), High: max(env.High, s.High)}
		}
	}
	if f.PartitionMin >= pmin && f.PartitionMax <= pmax && found && env.Low <= f.Offsets.Low && f.Offsets.High <= env.High {
		return
	}
	a.find(Finding{Level: LevelFiles, Kind: KindStrayFile, File: f.Path, SnapshotID: id,
		Detail: fmt.Sprintf("a file of a file group of snapshot %d holds rows of partitions %d to %d at offsets %s, beyond its group's %d spans (partitions %d to %d, offsets %s): some of its rows are not the group's",
			id, f.PartitionMin, f.PartitionMax, f.Offsets, len(spans), pmin, pmax, env)})
}

// missingGroupFiles reports the files of c's groups covering range r that
// are no longer live, once per group (done): the group's rows are short.
func (a *auditor) missingGroupFiles(c mapping.Commit, r mapping.Range, live map[string]bool, done map[[2]int64]bool) (inGroup bool) {
	for i, g := range c.FileGroups {
		if r.Deleted() || !g.Overlaps(r) {
			continue
		}
		inGroup = true
		if done[[2]int64{c.SnapshotID, int64(i)}] {
			continue
		}
		done[[2]int64{c.SnapshotID, int64(i)}] = true
		ranges := describeRanges(groupRanges(&c, g))
		for _, p := range g.Files {
			if live[p] {
				continue
			}
			a.find(Finding{Level: LevelFiles, Kind: KindMissingFile, Partition: r.TopicPartition, HasPartition: true,
				Others: otherPartitions(r.TopicPartition, groupRanges(&c, g)), File: p, SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("file of the file group added by snapshot %d for ranges %s is no longer live: its rows were deleted or overwritten", c.SnapshotID, ranges)})
		}
	}
	return inGroup
}

// otherPartitions are the partitions of rs but first, sorted, for
// Finding.Others.
func otherPartitions(first mapping.TopicPartition, rs []mapping.Range) []mapping.TopicPartition {
	var out []mapping.TopicPartition
	for _, r := range rs {
		if r.TopicPartition != first && !slices.Contains(out, r.TopicPartition) {
			out = append(out, r.TopicPartition)
		}
	}
	slices.SortFunc(out, mapping.TopicPartition.Compare)
	return out
}

// describeRanges names ranges for a finding: partition and offsets of the
// first few, and how many more.
func describeRanges(rs []mapping.Range) string {
	const shown = 4
	parts := make([]string, 0, min(len(rs), shown))
	for _, r := range rs[:min(len(rs), shown)] {
		parts = append(parts, r.TopicPartition.String()+" "+r.Interval.String())
	}
	s := strings.Join(parts, ", ")
	if len(rs) > shown {
		s += fmt.Sprintf(" and %d more", len(rs)-shown)
	}
	return s
}

// groupCount reports a set of ranges joined by file groups (of commits
// grouped) whose live files hold held rows where its ranges have want
// records: the groups' files no longer live, when rows are missing, then
// a count mismatch naming the ranges.
func (a *auditor) groupCount(keys []rangeKey, grouped []mapping.Commit, want, held int64, live map[string]bool, missing map[[2]int64]bool) {
	slices.SortFunc(keys, func(x, y rangeKey) int {
		if c := cmp.Compare(x.snapshot, y.snapshot); c != 0 {
			return c
		}
		if c := x.r.TopicPartition.Compare(y.r.TopicPartition); c != 0 {
			return c
		}
		return cmp.Compare(x.r.Low, y.r.Low)
	})
	if held < want {
		for _, c := range grouped {
			for _, k := range keys {
				if k.snapshot == c.SnapshotID {
					a.missingGroupFiles(c, k.r, live, missing)
				}
			}
		}
	}
	rs := make([]mapping.Range, len(keys))
	for i, k := range keys {
		rs[i] = k.r
	}
	first := keys[0]
	a.find(Finding{Level: LevelFiles, Kind: KindCountMismatch, Partition: first.r.TopicPartition, HasPartition: true,
		Others: otherPartitions(first.r.TopicPartition, rs), Offsets: first.r.Interval, HasOffsets: true, SnapshotID: first.snapshot,
		Detail: fmt.Sprintf("the %d ranges %s (snapshot %d), which a file group holds together, have %d records in the ledger; their live files hold %d rows",
			len(keys), describeRanges(rs), first.snapshot, want, held)})
}
