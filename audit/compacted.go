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

// setKey is a node of rangeSets: a ledger range that live files the sink
// wrote hold (range), or the offsets that a compacted file, or a span of a
// compaction's file group, holds (chain > 0: a.chains[chain-1]). Compacted
// files are placed by their offsets, not range by range, so that the sets
// hold a node per compacted file, not per range it covers: a year-old
// table's compacted files cover most of its ledger.
type setKey struct {
	r     rangeKey
	chain int
}

func rangeNode(k rangeKey) setKey { return setKey{r: k} }
func chainNode(i int) setKey      { return setKey{chain: i + 1} }

// rangeSets counts the rows the live files hold per set of ranges. A file
// floe's sink wrote lies in one range, so its range is a set of its own
// (a file group's files join its ranges); a file floe's compaction wrote
// spans a chain of ranges, and every range of the chain belongs to the
// set of the chain's node. The files level then compares the rows of each
// set's files with the sum of its ranges' record counts. (The rows level
// still counts every range on its own.)
type rangeSets struct {
	parent  map[setKey]setKey
	members map[setKey]int   // by root
	held    map[setKey]int64 // by root
	// compacted marks (by root) the sets that files of floe's
	// compactions hold: the files the sink wrote for their ranges were
	// replaced, so they are not missing.
	compacted map[setKey]bool
}

func newRangeSets() *rangeSets {
	return &rangeSets{parent: map[setKey]setKey{}, members: map[setKey]int{}, held: map[setKey]int64{}, compacted: map[setKey]bool{}}
}

func (s *rangeSets) root(k setKey) setKey {
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
func (s *rangeSets) add(n int64, keys ...setKey) {
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
func (s *rangeSets) addCompacted(n int64, keys ...setKey) {
	s.add(n, keys...)
	s.compacted[s.root(keys[0])] = true
}

// heldBy returns the rows counted for k's set, and whether the set holds
// other ranges too. A range no file was counted for is in no set, and is
// not added to one: the files level asks for every range of the ledger,
// and adding each made it hold them all (960 MB of maps for 1,000,000
// ranges, most of its time).
func (s *rangeSets) heldBy(k setKey) (rows int64, joined bool) {
	if _, ok := s.parent[k]; !ok {
		return 0, false
	}
	r := s.root(k)
	return s.held[r], s.members[r] > 1
}

// chains are the chains (mapping.Chain) on which the files level places
// compacted files and the spans of compactions' file groups, with what it
// decided of each (state, by index).
type chains struct {
	mapping.Chains
	state []chainState
}

// chainState: placed, a file's rows count for the chain's set;
// unattributed, the chain is one of several topics' that could hold a
// file, and its ranges are not judged.
type chainState struct {
	placed, unattributed bool
}

func (x *chains) add(tp mapping.TopicPartition, iv mapping.Interval) int {
	x.state = append(x.state, chainState{})
	return x.Add(tp, iv)
}

// placedGroup is a file group of a floe compaction placed on the ledger:
// the chains of its spans, or the first span no chain of ranges holds.
type placedGroup struct {
	group  mapping.FileGroup
	chains []int
	stray  *mapping.Span
	// reported is set once the stray span was reported.
	reported bool
}

// compactedGroup returns the file group that the floe compaction which
// added f records f in, with a chain for each of its spans; nil when f is
// in none (it holds one Kafka partition, and its bounds place it).
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
			pg.chains = append(pg.chains, a.chains.add(s.TopicPartition, s.Interval))
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

// compactedFiles places the live files that floe's compactions added
// (files) on the ledger, in sets, and returns how many of them several
// topics could hold (their ranges are not judged). A file the compaction
// recorded in a file group is placed by the group's spans; another by its
// bounds, on the chain of ranges of the one topic that holds its offsets.
// A file that no chain holds (bounds missing or across partitions,
// offsets reaching a gap, a lost or aborted range, or beyond the ledger)
// is reported as stray. The chains are checked in one pass over the
// ledger; chains of one partition whose extents overlap share ranges, and
// their sets are joined.
func (a *auditor) compactedFiles(ctx context.Context, files []snapshot.DataFile, sets *rangeSets) (ambiguous int, err error) {
	table := a.tbl.Name()
	a.chains = &chains{}
	type pure struct {
		f          snapshot.DataFile
		candidates []int
	}
	var pures []pure
	var grouped []snapshot.DataFile
	for _, f := range files {
		g, err := a.compactedGroup(ctx, f)
		if err != nil {
			a.find(Finding{Level: LevelFiles, Kind: KindStrayFile, File: f.Path, SnapshotID: f.AddedBy,
				Detail: fmt.Sprintf("floe compaction snapshot %d of %s, which added the file, has file groups that cannot be read (%v): its %d rows cannot be placed in the ledger", f.AddedBy, table, err, f.Records)})
			continue
		}
		if g != nil {
			grouped = append(grouped, f)
			continue
		}
		switch {
		case !f.HasBounds:
			a.strayCompacted(f, fmt.Sprintf("file of %s added by floe compaction snapshot %d has no partition and offset bounds in its manifest: its %d rows cannot be placed in the ledger", table, f.AddedBy, f.Records))
			continue
		case f.PartitionMin != f.PartitionMax:
			a.strayCompacted(f, fmt.Sprintf("file of %s added by floe compaction snapshot %d holds rows of partitions %d to %d; floe writes one partition per file", table, f.AddedBy, f.PartitionMin, f.PartitionMax))
			continue
		}
		p := pure{f: f}
		for _, topic := range a.topics {
			if f.MayHoldTopic(topic) {
				p.candidates = append(p.candidates, a.chains.add(mapping.TopicPartition{Topic: topic, Partition: f.PartitionMin}, f.Offsets))
			}
		}
		pures = append(pures, p)
	}
	if a.chains.Len() == 0 {
		return 0, nil
	}
	a.chains.Build()
	if err := a.eachCommit(ctx, func(c mapping.Commit) {
		for _, r := range c.Ranges {
			a.chains.Meet(r)
		}
	}); err != nil {
		return 0, err
	}

	chains, state := a.chains, a.chains.state
	for _, p := range pures {
		var oks []int
		for _, i := range p.candidates {
			if chains.Chain(i).OK() {
				oks = append(oks, i)
			}
		}
		switch len(oks) {
		case 0:
			a.strayCompacted(p.f, fmt.Sprintf("%d rows of %s at offsets %s, in a file of floe compaction snapshot %d, do not lie on one unbroken chain of ledger ranges (they reach a gap, a lost or aborted range, or offsets outside the ledger)",
				p.f.Records, table, p.f.Offsets, p.f.AddedBy))
		case 1:
			state[oks[0]].placed = true
			sets.addCompacted(p.f.Records, chainNode(oks[0]))
			if tp := chains.Chain(oks[0]).TopicPartition; a.selected(tp.Topic) {
				a.part(tp).Files++
			}
		default:
			ambiguous++
			for _, i := range oks {
				state[i].unattributed = true
			}
		}
	}
	for _, f := range grouped {
		a.groupedFile(f, a.compactedGroups[f.Path], sets)
	}
	// Chains of one partition whose extents overlap share ranges: a sweep
	// by extent joins each with the widest one before it that it
	// overlaps.
	for ids := range chains.PerPartition() {
		var placed []int
		for _, i := range ids {
			if state[i].placed {
				placed = append(placed, i)
			}
		}
		slices.SortFunc(placed, func(x, y int) int { return cmp.Compare(chains.Chain(x).Extent().Low, chains.Chain(y).Extent().Low) })
		widest := -1
		for _, i := range placed {
			ext := chains.Chain(i).Extent()
			if widest >= 0 && ext.Low < chains.Chain(widest).Extent().High {
				sets.add(0, chainNode(widest), chainNode(i))
			}
			if widest < 0 || ext.High > chains.Chain(widest).Extent().High {
				widest = i
			}
		}
	}
	return ambiguous, nil
}

// strayCompacted reports compacted file f as a stray file, naming its
// partition and offsets when its bounds hold one partition.
func (a *auditor) strayCompacted(f snapshot.DataFile, detail string) {
	fd := Finding{Level: LevelFiles, Kind: KindStrayFile, File: f.Path, SnapshotID: f.AddedBy, Detail: detail}
	if f.HasBounds && f.PartitionMin == f.PartitionMax {
		fd.Partition, fd.HasPartition = a.topicOf(f.PartitionMin), true
		fd.Offsets, fd.HasOffsets = f.Offsets, f.Records > 0
	}
	a.find(fd)
}

// groupedFile counts f's rows for the set of its file group's chains:
// with every other file of the group, the set's files must hold the
// records of the ranges the group's spans cover (joinedCounts). A group
// with a span that no unbroken chain of ranges holds is reported as
// stray, once.
func (a *auditor) groupedFile(f snapshot.DataFile, g *placedGroup, sets *rangeSets) {
	if g.stray == nil {
		for i, id := range g.chains {
			if !a.chains.Chain(id).OK() {
				g.stray = &g.group.Spans[i]
				break
			}
		}
	}
	if g.stray != nil {
		if !g.reported {
			g.reported = true
			a.find(Finding{Level: LevelFiles, Kind: KindStrayFile, File: f.Path, SnapshotID: f.AddedBy,
				Partition: g.stray.TopicPartition, HasPartition: true, Offsets: g.stray.Interval, HasOffsets: true,
				Detail: fmt.Sprintf("floe compaction snapshot %d of %s says its group of %d files holds offsets %s of %s, which do not lie on one unbroken chain of ledger ranges (they reach a gap, a lost or aborted range, or offsets outside the ledger): its rows cannot be placed",
					f.AddedBy, a.tbl.Name(), len(g.group.Files), g.stray.Interval, g.stray.TopicPartition)})
		}
		return
	}
	a.outsideSpans(f, g.group.Spans, f.AddedBy)
	keys := make([]setKey, len(g.chains))
	for i, id := range g.chains {
		a.chains.state[id].placed = true
		keys[i] = chainNode(id)
	}
	sets.addCompacted(f.Records, keys...)
	for i, s := range g.group.Spans {
		// Spans are sorted by partition: count the file once for each.
		if a.selected(s.Topic) && (i == 0 || g.group.Spans[i-1].TopicPartition != s.TopicPartition) {
			a.part(s.TopicPartition).Files++
		}
	}
}

// joinChains joins each range node of sets (a range that files the sink
// wrote hold) that a placed chain covers too with the chain's set: those
// files and the compacted ones hold its rows together.
func (a *auditor) joinChains(sets *rangeSets) {
	if a.chains == nil || a.chains.Len() == 0 {
		return
	}
	var nodes []setKey
	for k := range sets.parent {
		if k.chain == 0 {
			nodes = append(nodes, k)
		}
	}
	for _, k := range nodes {
		a.chains.Meeting(k.r.r, func(i int) {
			if a.chains.state[i].placed {
				sets.add(0, k, chainNode(i))
			}
		})
	}
}

// onChain returns the set of the placed chain that range r lies on, and
// whether a chain of several topics' meets it (it is not judged); ok
// false when no chain meets it.
func (a *auditor) onChain(sets *rangeSets, r mapping.Range) (root setKey, unattributed, ok bool) {
	if a.chains == nil || a.chains.Len() == 0 {
		return setKey{}, false, false
	}
	a.chains.Meeting(r, func(i int) {
		switch c := a.chains.state[i]; {
		case c.placed:
			root, ok = sets.root(chainNode(i)), true
		case c.unattributed:
			unattributed, ok = true, true
		}
	})
	return root, unattributed, ok
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

// joinedSet accumulates, over one pass of the ledger, what joinedCounts
// compares of a set of ranges: their records (want), and enough to name
// them: how many, the lowest and the highest range of each partition,
// and, for a set no compacted file holds (file groups of the sink, whose
// files are live, so few), every range and the commits whose groups hold
// them.
type joinedSet struct {
	want, held int64
	judged     bool
	n          int
	low, high  map[mapping.TopicPartition]rangeKey
	keys       []rangeKey
	grouped    []mapping.Commit
}

func (s *joinedSet) add(k rangeKey) {
	s.n++
	s.want += k.r.Records
	if lo, ok := s.low[k.r.TopicPartition]; !ok || k.r.Low < lo.r.Low {
		s.low[k.r.TopicPartition] = k
	}
	if hi, ok := s.high[k.r.TopicPartition]; !ok || k.r.Low > hi.r.Low {
		s.high[k.r.TopicPartition] = k
	}
}

// joinedCounts compares, for every set of ranges that compacted files or
// a file group joined, the rows its live files hold with the sum of its
// ranges' record counts; a set short of rows names its groups' files that
// are no longer live (live, once per group: missing). Ranges in
// unattributed are not judged.
func (a *auditor) joinedCounts(ctx context.Context, sets *rangeSets, unattributed map[rangeKey]bool, live map[string]bool, missing map[[2]int64]bool) error {
	byRoot := map[setKey]*joinedSet{}
	if len(sets.parent) == 0 {
		return nil
	}
	err := a.eachCommit(ctx, func(c mapping.Commit) {
		for _, r := range c.Ranges {
			k := rangeKey{c.SnapshotID, r}
			root, chainUnattributed, onChain := a.onChain(sets, r)
			if !onChain || root == (setKey{}) {
				// On no placed chain (at most on chains of several
				// topics, which leave it unjudged): the set files of the
				// sink joined it to, if any.
				if _, ok := sets.parent[rangeNode(k)]; !ok {
					continue
				}
				if _, joined := sets.heldBy(rangeNode(k)); !joined {
					continue
				}
				root = sets.root(rangeNode(k))
			}
			s := byRoot[root]
			if s == nil {
				s = &joinedSet{held: sets.held[root], judged: true, low: map[mapping.TopicPartition]rangeKey{}, high: map[mapping.TopicPartition]rangeKey{}}
				byRoot[root] = s
			}
			s.add(k)
			if !sets.compacted[root] {
				s.keys = append(s.keys, k)
				if len(c.FileGroups) > 0 && !slices.ContainsFunc(s.grouped, func(o mapping.Commit) bool { return o.SnapshotID == c.SnapshotID }) {
					s.grouped = append(s.grouped, c)
				}
			}
			if unattributed[k] || chainUnattributed || !a.selected(r.Topic) {
				s.judged = false
			}
		}
	})
	if err != nil {
		return err
	}
	for root, s := range byRoot {
		if !s.judged || s.want == s.held {
			continue
		}
		if len(s.grouped) > 0 && !sets.compacted[root] {
			a.groupCount(s.keys, s.grouped, s.want, s.held, live, missing)
			continue
		}
		tps := slices.SortedFunc(func(yield func(mapping.TopicPartition) bool) {
			for tp := range s.low {
				if !yield(tp) {
					return
				}
			}
		}, mapping.TopicPartition.Compare)
		first, last := s.low[tps[0]], s.high[tps[len(tps)-1]]
		fd := Finding{Level: LevelFiles, Kind: KindCountMismatch, Partition: first.r.TopicPartition, HasPartition: true,
			Offsets: mapping.Interval{Low: first.r.Low, High: last.r.High}, HasOffsets: true, SnapshotID: first.snapshot,
			Detail: fmt.Sprintf("the %d ranges from %s (snapshot %d) to %s (snapshot %d), which compacted files span, have %d records in the ledger; their live files hold %d",
				s.n, first.r.Interval, first.snapshot, last.r.Interval, last.snapshot, s.want, s.held)}
		if len(tps) > 1 {
			// A file group's: name every partition, with the offsets of
			// the first.
			names := make([]string, len(tps))
			for i, tp := range tps {
				names[i] = tp.String()
			}
			fd.Offsets.High = s.high[tps[0]].r.High
			fd.Others = tps[1:]
			fd.Detail = fmt.Sprintf("the %d ranges of %d partitions (%s), which a file group of compacted files spans, have %d records in the ledger; their live files hold %d",
				s.n, len(tps), strings.Join(names, ", "), s.want, s.held)
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
