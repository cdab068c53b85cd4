package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// rangeSets counts the rows the live files hold per set of ranges. A file
// floe's sink wrote lies in one range, so its range is a set of its own; a
// file floe's compaction wrote spans a chain of ranges, which it joins into
// one set, and the files level then compares the rows of the set's files
// with the sum of its ranges' record counts. (The rows level still counts
// every range on its own.)
type rangeSets struct {
	parent  map[rangeKey]rangeKey
	members map[rangeKey]int   // by root
	held    map[rangeKey]int64 // by root
	// compacted marks (by root) the sets that files of floe's
	// compactions hold: the files the sink wrote for their ranges were
	// replaced, so they are not missing.
	compacted map[rangeKey]bool
}

func newRangeSets() *rangeSets {
	return &rangeSets{parent: map[rangeKey]rangeKey{}, members: map[rangeKey]int{}, held: map[rangeKey]int64{}, compacted: map[rangeKey]bool{}}
}

func (s *rangeSets) root(k rangeKey) rangeKey {
	p, ok := s.parent[k]
	if !ok {
		s.parent[k], s.members[k] = k, 1
		return k
	}
	if p == k {
		return k
	}
	r := s.root(p)
	s.parent[k] = r
	return r
}

// add joins keys into one set and counts n rows for it.
func (s *rangeSets) add(n int64, keys ...rangeKey) {
	r := s.root(keys[0])
	for _, k := range keys[1:] {
		if o := s.root(k); o != r {
			s.parent[o] = r
			s.members[r] += s.members[o]
			s.held[r] += s.held[o]
			s.compacted[r] = s.compacted[r] || s.compacted[o]
			delete(s.members, o)
			delete(s.held, o)
			delete(s.compacted, o)
		}
	}
	s.held[r] += n
}

// addCompacted is add for the files of a floe compaction.
func (s *rangeSets) addCompacted(n int64, keys ...rangeKey) {
	s.add(n, keys...)
	s.compacted[s.root(keys[0])] = true
}

// heldBy returns the rows counted for k's set, and whether the set holds
// other ranges too. A range no file was counted for is in no set, and is
// not added to one: the files level asks for every range of the ledger,
// and adding each made it hold them all (960 MB of maps for 1,000,000
// ranges, most of its time).
func (s *rangeSets) heldBy(k rangeKey) (rows int64, joined bool) {
	if _, ok := s.parent[k]; !ok {
		return 0, false
	}
	r := s.root(k)
	return s.held[r], s.members[r] > 1
}

// spanIndex indexes the ledger for placing compacted files, once.
func (a *auditor) spanIndex() mapping.SpanIndex {
	if a.spans == nil {
		ix := a.ledger.SpanIndex()
		a.spans = &ix
	}
	return *a.spans
}

// compactedFile places a live file that a compaction of floe's added on
// the chain of ledger ranges its offset bounds cover, joining them in
// sets; a file the compaction recorded in a file group is placed by the
// group's spans instead (groupedFile). It reports a file that no chain holds (bounds missing or across
// partitions, offsets reaching a gap, a lost or aborted range or beyond
// the ledger) as stray, and returns the chains when several topics could
// hold it (the caller leaves their ranges uncounted).
func (a *auditor) compactedFile(ctx context.Context, f snapshot.DataFile, sets *rangeSets, table string) (ambiguous [][]mapping.CommitRange) {
	g, err := a.compactedGroup(ctx, f)
	if err != nil {
		a.find(Finding{Level: LevelFiles, Kind: KindStrayFile, File: f.Path, SnapshotID: f.AddedBy,
			Detail: fmt.Sprintf("floe compaction snapshot %d of %s, which added the file, has file groups that cannot be read (%v): its %d rows cannot be placed in the ledger", f.AddedBy, table, err, f.Records)})
		return nil
	}
	if g != nil {
		a.groupedFile(f, g, sets, table)
		return nil
	}
	stray := func(detail string) {
		fd := Finding{Level: LevelFiles, Kind: KindStrayFile, File: f.Path, SnapshotID: f.AddedBy, Detail: detail}
		if f.HasBounds && f.PartitionMin == f.PartitionMax {
			fd.Partition, fd.HasPartition = a.topicOf(f.PartitionMin), true
			fd.Offsets, fd.HasOffsets = f.Offsets, f.Records > 0
		}
		a.find(fd)
	}
	switch {
	case !f.HasBounds:
		stray(fmt.Sprintf("file of %s added by floe compaction snapshot %d has no partition and offset bounds in its manifest: its %d rows cannot be placed in the ledger", table, f.AddedBy, f.Records))
		return nil
	case f.PartitionMin != f.PartitionMax:
		stray(fmt.Sprintf("file of %s added by floe compaction snapshot %d holds rows of partitions %d to %d; floe writes one partition per file", table, f.AddedBy, f.PartitionMin, f.PartitionMax))
		return nil
	}
	var chains [][]mapping.CommitRange
	for _, topic := range a.topics {
		if !f.MayHoldTopic(topic) {
			continue
		}
		if chain, ok := a.spanIndex().Span(mapping.TopicPartition{Topic: topic, Partition: f.PartitionMin}, f.Offsets); ok {
			chains = append(chains, chain)
		}
	}
	switch len(chains) {
	case 0:
		stray(fmt.Sprintf("%d rows of %s at offsets %s, in a file of floe compaction snapshot %d, do not lie on one unbroken chain of ledger ranges (they reach a gap, a lost or aborted range, or offsets outside the ledger)",
			f.Records, table, f.Offsets, f.AddedBy))
	case 1:
		keys := make([]rangeKey, len(chains[0]))
		for i, r := range chains[0] {
			keys[i] = rangeKey{r.SnapshotID, r.Range}
		}
		sets.addCompacted(f.Records, keys...)
		if a.selected(chains[0][0].Topic) && table == a.tbl.Name() {
			a.part(chains[0][0].TopicPartition).Files++
		}
	default:
		return chains
	}
	return nil
}

// placedGroup is a file group of a floe compaction placed on the ledger:
// the ranges its spans cover, or the first span no chain of ranges holds.
type placedGroup struct {
	group mapping.FileGroup
	keys  []rangeKey
	stray *mapping.Span
	// reported is set once the stray span was reported.
	reported bool
}

// compactedGroup returns the file group that the floe compaction which
// added f records f in, placed on the ledger's ranges (each span on the
// chain of ranges that holds it, mapping.SpanIndex.Span); nil when f is in
// none (it holds one Kafka partition, and its bounds place it).
func (a *auditor) compactedGroup(ctx context.Context, f snapshot.DataFile) (*placedGroup, error) {
	if a.compactedGroups == nil {
		a.compactedGroups, a.groupsRead = map[string]*placedGroup{}, map[int64]bool{}
	}
	if g, ok := a.compactedGroups[f.Path]; ok || a.groupsRead[f.AddedBy] {
		return g, nil
	}
	gs, err := a.tbl.CompactionGroups(ctx, f.AddedBy)
	if err != nil {
		return nil, err
	}
	// Read once per compaction: an expired one's groups are in its block
	// of the ledger archive.
	a.groupsRead[f.AddedBy] = true
	for _, g := range gs {
		pg := &placedGroup{group: g}
		for _, s := range g.Spans {
			chain, ok := a.spanIndex().Span(s.TopicPartition, s.Interval)
			if !ok {
				pg.stray = &s
				break
			}
			for _, r := range chain {
				pg.keys = append(pg.keys, rangeKey{r.SnapshotID, r.Range})
			}
		}
		for _, path := range g.Files {
			a.compactedGroups[path] = pg
		}
	}
	if _, ok := a.compactedGroups[f.Path]; !ok {
		a.compactedGroups[f.Path] = nil
	}
	return a.compactedGroups[f.Path], nil
}

// groupedFile joins the ranges that the spans of f's file group cover
// into one set holding f's rows: with every other file of the group, the
// set's files must hold its ranges' records (joinedCounts). A group with a
// span that no unbroken chain of ranges holds is reported as stray, once.
func (a *auditor) groupedFile(f snapshot.DataFile, g *placedGroup, sets *rangeSets, table string) {
	if g.stray != nil {
		if !g.reported {
			g.reported = true
			a.find(Finding{Level: LevelFiles, Kind: KindStrayFile, File: f.Path, SnapshotID: f.AddedBy,
				Partition: g.stray.TopicPartition, HasPartition: true, Offsets: g.stray.Interval, HasOffsets: true,
				Detail: fmt.Sprintf("floe compaction snapshot %d of %s says its group of %d files holds offsets %s of %s, which do not lie on one unbroken chain of ledger ranges (they reach a gap, a lost or aborted range, or offsets outside the ledger): its rows cannot be placed",
					f.AddedBy, table, len(g.group.Files), g.stray.Interval, g.stray.TopicPartition)})
		}
		return
	}
	sets.addCompacted(f.Records, g.keys...)
	if table != a.tbl.Name() {
		return
	}
	for i, s := range g.group.Spans {
		// Spans are sorted by partition: count the file once for each.
		if a.selected(s.Topic) && (i == 0 || g.group.Spans[i-1].TopicPartition != s.TopicPartition) {
			a.part(s.TopicPartition).Files++
		}
	}
}

// grouped reports whether live data file f is in a file group of the
// commit or the floe compaction that added it (the files level placed
// compacted files before).
func (a *auditor) grouped(f snapshot.DataFile) bool {
	if a.compactedGroups[f.Path] != nil {
		return true
	}
	if c := a.commits[f.AddedBy]; c != nil {
		for _, g := range c.FileGroups {
			if slices.Contains(g.Files, f.Path) {
				return true
			}
		}
	}
	return false
}

// joinedCounts compares, for every set of ranges that compacted files or
// a file group joined, the rows its live files hold with the sum of its
// ranges' record counts; a set short of rows names its groups' files that
// are no longer live (live, once per group: missing). Ranges in
// unattributed are not judged.
func (a *auditor) joinedCounts(ctx context.Context, sets *rangeSets, unattributed map[rangeKey]bool, live map[string]bool, missing map[[2]int64]bool) error {
	type set struct {
		keys       []rangeKey
		want, held int64
		judged     bool
		// grouped are the commits whose file groups hold ranges of the set.
		grouped []mapping.Commit
	}
	byRoot := map[rangeKey]*set{}
	if len(sets.parent) == 0 {
		return nil
	}
	err := a.eachCommit(ctx, func(c mapping.Commit) {
		for _, r := range c.Ranges {
			k := rangeKey{c.SnapshotID, r}
			if _, ok := sets.parent[k]; !ok {
				continue
			}
			held, joined := sets.heldBy(k)
			if !joined {
				continue
			}
			root := sets.root(k)
			s := byRoot[root]
			if s == nil {
				s = &set{held: held, judged: true}
				byRoot[root] = s
			}
			s.keys = append(s.keys, k)
			s.want += r.Records
			if len(c.FileGroups) > 0 && !slices.ContainsFunc(s.grouped, func(o mapping.Commit) bool { return o.SnapshotID == c.SnapshotID }) {
				s.grouped = append(s.grouped, c)
			}
			if unattributed[k] || !a.selected(r.Topic) {
				s.judged = false
			}
		}
	})
	if err != nil {
		return err
	}
	for _, s := range byRoot {
		if !s.judged || s.want == s.held {
			continue
		}
		if len(s.grouped) > 0 && !sets.compacted[sets.root(s.keys[0])] {
			a.groupCount(s.keys, s.grouped, s.want, s.held, live, missing)
			continue
		}
		slices.SortFunc(s.keys, func(x, y rangeKey) int {
			return cmp.Or(x.r.TopicPartition.Compare(y.r.TopicPartition), cmp.Compare(x.r.Low, y.r.Low))
		})
		first, last := s.keys[0], s.keys[len(s.keys)-1]
		fd := Finding{Level: LevelFiles, Kind: KindCountMismatch, Partition: first.r.TopicPartition, HasPartition: true,
			Offsets: mapping.Interval{Low: first.r.Low, High: last.r.High}, HasOffsets: true, SnapshotID: first.snapshot,
			Detail: fmt.Sprintf("the %d ranges from %s (snapshot %d) to %s (snapshot %d), which compacted files span, have %d records in the ledger; their live files hold %d",
				len(s.keys), first.r.Interval, first.snapshot, last.r.Interval, last.snapshot, s.want, s.held)}
		if first.r.TopicPartition != last.r.TopicPartition {
			// A file group's: name every partition, with the offsets of
			// the first.
			var tps []string
			for i, k := range s.keys {
				if i == 0 || s.keys[i-1].r.TopicPartition != k.r.TopicPartition {
					tps = append(tps, k.r.TopicPartition.String())
				}
			}
			fd.Offsets.High = first.r.High
			for _, k := range s.keys[1:] {
				if k.r.TopicPartition == first.r.TopicPartition {
					fd.Offsets.High = k.r.High
				}
			}
			fd.Detail = fmt.Sprintf("the %d ranges of %d partitions (%s), which a file group of compacted files spans, have %d records in the ledger; their live files hold %d",
				len(s.keys), len(tps), strings.Join(tps, ", "), s.want, s.held)
		}
		a.find(fd)
	}
	return nil
}

// compactions checks the compaction snapshots of floe in the history of
// tbl's branch head that are still in its metadata: a compaction replaces
// files without adding or removing a row, so its summary's added and
// deleted record counts are equal (and equal to what it says it moved).
// Expired ones are left to the row counts of the files level.
func (a *auditor) compactions(tbl *snapshot.Table) {
	head := tbl.Head()
	if head == nil {
		return
	}
	meta := tbl.Iceberg().Metadata()
	for _, s := range table.AncestorsOf(head.SnapshotID, meta.SnapshotByID) {
		if s.Summary == nil || s.Summary.Properties[snapshot.KeyOperation] != snapshot.OperationCompact {
			continue
		}
		p := s.Summary.Properties
		added, _ := strconv.ParseInt(p["added-records"], 10, 64)
		deleted, _ := strconv.ParseInt(p["deleted-records"], 10, 64)
		moved, err := strconv.ParseInt(p[snapshot.KeyCompactRows], 10, 64)
		if added == deleted && err == nil && moved == added && s.Summary.Operation == table.OpReplace {
			continue
		}
		a.find(Finding{Level: LevelFiles, Kind: KindCountMismatch, SnapshotID: s.SnapshotID,
			Detail: fmt.Sprintf("floe compaction snapshot %d of %s (operation %s) removed files holding %d rows and added files holding %d (it says it moved %s): a compaction never changes rows",
				s.SnapshotID, tbl.Name(), s.Summary.Operation, deleted, added, orZero(p[snapshot.KeyCompactRows]))})
	}
}
