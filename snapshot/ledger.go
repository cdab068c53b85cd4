package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"slices"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// archivedAt is where an archived entry and its ranges are: entry i of
// an indexed segment, in one of its blocks.
type archivedAt struct {
	path  string
	ix    *segmentIndex
	block int
	entry int
}

// ledgerPart is a run of consecutive floe commits of a ledger: one live
// snapshot, or the commits ids of one archived block.
type ledgerPart struct {
	snap *table.Snapshot
	at   archivedAt
	ids  []int64
	// whole is set when ids are every floe commit of the block, in the
	// order its summary folded them: the summary is theirs.
	whole bool
}

// ledgerParts returns the parts of the ledger as of a snapshot, oldest
// first, or a *TruncatedLedgerError. Nothing is decoded or read. Below the
// live snapshots it takes the archive's memoized parts (archiveIndex.parts):
// the scheduled compaction asks at every run, and walking the whole
// archived history each time cost a long-lived sink CPU in proportion to
// it (the soak: 6.7 % of it at 70,000 commits).
func (t *Table) ledgerParts(snapshotID int64) ([]ledgerPart, error) {
	meta := t.tbl.Metadata()
	var live []ledgerPart // newest first
	id, oldest, done, _ := liveAncestors(meta, snapshotID, func(s *table.Snapshot) error {
		if s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) {
			live = append(live, ledgerPart{snap: s})
		}
		return nil
	})
	var parts []ledgerPart
	if !done {
		below, complete := t.archive.parts(meta, id)
		if !complete {
			// A truncated history is rare: ancestry names where it ends.
			if _, te := ancestry(meta, t.archive, snapshotID); te != nil {
				te.Table = t.Name()
				return nil, te
			}
			return nil, &TruncatedLedgerError{Table: t.Name(), SnapshotID: snapshotID, Oldest: oldest}
		}
		parts = below
	}
	slices.Reverse(live)
	return append(parts, live...), nil
}

// commitIDs returns the ids of the part's floe commits, in ledger order:
// a whole part's are its block's (archiveIndex.parts keeps them once).
func (p ledgerPart) commitIDs() []int64 {
	if p.ids != nil || !p.whole {
		return p.ids
	}
	return p.at.blockCommits()
}

// settle sets whether an archived part is whole, and then forgets its ids:
// they are its block's.
func (p *ledgerPart) settle() {
	floe := p.at.blockCommits()
	// A commit the summary left out (it did not decode) makes the
	// block's readers decode it, and meet its error.
	p.whole = slices.Equal(floe, p.ids) && p.at.ix.Blocks[p.at.block].Commits == len(floe)
	if p.whole {
		p.ids = nil
	}
}

// blockCommits returns the ids of the floe commits of at's block, in the
// order of its entries.
func (at archivedAt) blockCommits() []int64 {
	b := at.ix.Blocks[at.block]
	var ids []int64
	for _, e := range at.ix.entries[b.First : b.First+b.Count] {
		if e.floeCommit() {
			ids = append(ids, e.id)
		}
	}
	return ids
}

// only returns the archived part p without the commits f does not accept
// (a part of no commit when it accepts none), and a live one as it is.
func (p ledgerPart) only(f commitFilter) ledgerPart {
	if p.snap != nil {
		return p
	}
	b := p.at.ix.Blocks[p.at.block]
	accepted := make(map[int64]bool, b.Count)
	for i := b.First; i < b.First+b.Count; i++ {
		e := &p.at.ix.entries[i]
		accepted[e.id] = (f.deadLetters == "" || p.at.ix.deadLetterTable(p.at.block, i) == f.deadLetters) &&
			(!f.grouped || e.flags()&entryFileGroups != 0) && (f.ids == nil || f.ids[e.id])
	}
	ids := p.commitIDs()
	out := ledgerPart{at: p.at}
	for _, id := range ids {
		if accepted[id] {
			out.ids = append(out.ids, id)
		}
	}
	out.whole = p.whole && len(out.ids) == len(ids)
	return out
}

// decode returns the commits of a part, in ledger order, reading its
// block when it is archived (fsys opened on first use).
func (t *Table) decode(ctx context.Context, fsys *iceio.IO, p ledgerPart) ([]mapping.Commit, error) {
	if p.snap != nil {
		c, err := t.ranges.commit(p.snap)
		if err != nil {
			return nil, err
		}
		return []mapping.Commit{c}, nil
	}
	if err := t.openArchive(ctx, fsys, p.at.path); err != nil {
		return nil, err
	}
	snaps, err := readBlock(*fsys, p.at.path, p.at.ix, p.at.block)
	if err != nil {
		return nil, &ArchiveError{Table: t.Name(), Path: p.at.path, Err: fmt.Errorf("block %d: %w", p.at.block, err)}
	}
	byID := make(map[int64]*ArchivedSnapshot, len(snaps))
	for i := range snaps {
		byID[snaps[i].SnapshotID] = &snaps[i]
	}
	ids := p.commitIDs()
	out := make([]mapping.Commit, 0, len(ids))
	for _, id := range ids {
		s := byID[id]
		c, err := mapping.DecodeCommit(s.SnapshotID, time.UnixMilli(s.TimestampMs).UTC(), s.Properties)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// openArchive opens the table's storage into fsys, unless it is open, to
// read the archive file at path.
func (t *Table) openArchive(ctx context.Context, fsys *iceio.IO, path string) error {
	if *fsys != nil {
		return nil
	}
	f, err := t.tbl.FS(ctx)
	if err != nil {
		return &ArchiveError{Table: t.Name(), Path: path, Err: err}
	}
	*fsys = f
	return nil
}

// blockSummary returns the summary of the block of an archived part: the
// one its index holds, or the one its segment's summaries file holds at
// the bytes the index records, or, when that file cannot be read, the
// fold of the block's commits, as the indexer folds them (fsys opened on
// first use).
func (t *Table) blockSummary(ctx context.Context, fsys *iceio.IO, at archivedAt) (mapping.Summary, error) {
	b := at.ix.Blocks[at.block]
	if b.Summary != nil {
		return b.Summary.Summary, nil
	}
	if b.SummaryLength == 0 {
		return mapping.Summary{}, nil
	}
	path := summariesPath(at.path)
	if err := t.openArchive(ctx, fsys, path); err != nil {
		return mapping.Summary{}, err
	}
	s, err := readSummary(*fsys, path, b)
	if err == nil {
		return s, nil
	}
	// The summaries file is gone or damaged (two writers rewrote a
	// legacy segment's index at once, one killed): the block's commits
	// say the same. When the segment is gone too (another writer's
	// expiry absorbed it), reading the block fails on it, and the reader
	// reloads.
	snaps, err := readBlock(*fsys, at.path, at.ix, at.block)
	if err != nil {
		return mapping.Summary{}, &ArchiveError{Table: t.Name(), Path: at.path, Err: fmt.Errorf("block %d: %w", at.block, err)}
	}
	for _, sn := range snaps {
		foldEntry(&s, sn)
	}
	return s, nil
}

// segmentRun returns the end of the run of parts from i on that are
// archived in the segment of parts[i], and whether they are its whole
// ledger: every floe commit of it, block after block, whose summary is
// then the segment's (segmentIndex.Summary). A branch's ledger most often
// holds whole segments: a reader folds a segment's summary and reads its
// blocks' only when it must look inside. A live part, and one inside a
// run (the part before it is of the same segment), starts none: i+1 and
// false.
func segmentRun(parts []ledgerPart, i int) (end int, whole bool) {
	p := parts[i]
	if !startsRun(parts, i) {
		return i + 1, false
	}
	whole = true
	floeBlocks := 0
	for end = i; end < len(parts) && parts[end].snap == nil && parts[end].at.ix == p.at.ix; end++ {
		q := parts[end]
		whole = whole && q.whole && (end == i || q.at.block > parts[end-1].at.block)
	}
	for _, b := range p.at.ix.Blocks {
		if b.Commits > 0 {
			floeBlocks++
		}
	}
	return end, whole && end-i == floeBlocks
}

// startsRun reports whether parts[i] is archived and the first of a run
// of parts of its segment.
func startsRun(parts []ledgerPart, i int) bool {
	p := parts[i]
	return p.snap == nil && (i == 0 || parts[i-1].snap != nil || parts[i-1].at.ix != p.at.ix)
}

// partitionSpans is segmentIndex.partitionSpans of the segment of an
// archived part (fsys opened on first use).
func (t *Table) partitionSpans(ctx context.Context, fsys *iceio.IO, at archivedAt, tp mapping.TopicPartition) ([]blockSpan, bool, error) {
	if at.ix.Partitions == nil {
		return nil, false, nil
	}
	path := summariesPath(at.path)
	if err := t.openArchive(ctx, fsys, path); err != nil {
		return nil, false, err
	}
	spans, ok, err := at.ix.partitionSpans(*fsys, at.path, tp)
	if err != nil {
		// Gone or damaged: the caller reads the blocks' summaries,
		// which fall back to the blocks (blockSummary).
		return nil, false, nil
	}
	return spans, ok, nil
}

// resolve returns the snapshot id a reader means: snapshotID, or the
// branch head for 0 (0 again when the branch has none yet).
func (t *Table) resolve(snapshotID int64) (int64, error) {
	if snapshotID != 0 {
		s, err := t.Snapshot(snapshotID)
		if err != nil {
			return 0, err
		}
		return s.SnapshotID, nil
	}
	if h := t.Head(); h != nil {
		return h.SnapshotID, nil
	}
	return 0, nil
}

// Commits yields the floe commits of the ledger as of a snapshot of the
// table (0: the branch head; none when the branch has no snapshot yet),
// oldest first, reading the ledger archive one block at a time: a reader
// that does not keep them holds one block's commits at most. Snapshots
// without floe properties are skipped. A malformed entry is a
// *mapping.MalformedError, a history with a gap a *TruncatedLedgerError,
// and the sequence ends at the first error.
func (t *Table) Commits(ctx context.Context, snapshotID int64) iter.Seq2[mapping.Commit, error] {
	return t.commitsWhere(ctx, snapshotID, commitFilter{})
}

// CommitsOf yields the floe commits of the ledger as of a snapshot (0:
// the branch head) whose snapshots are in ids, oldest first, reading only
// the archive blocks that hold one of them: a reader of a few commits
// pays for those, not for the ledger.
func (t *Table) CommitsOf(ctx context.Context, snapshotID int64, ids map[int64]bool) iter.Seq2[mapping.Commit, error] {
	return func(yield func(mapping.Commit, error) bool) {
		for c, err := range t.commitsWhere(ctx, snapshotID, commitFilter{ids: ids}) {
			// commitsWhere yields every live snapshot's commit.
			if err == nil && !ids[c.SnapshotID] {
				continue
			}
			if !yield(c, err) {
				return
			}
		}
	}
}

// CommitsWithDeadLetters yields the floe commits of the ledger as of a
// snapshot (0: the branch head) that may have ranges of tp ending past
// offset that sent records to a dead-letter table, oldest first: archived
// blocks whose summary shows no such range are not read, so that a lookup
// of a key's latest dead letter reads what may hold it, not the ledger's
// history. Other commits are yielded too; a caller checks each range.
func (t *Table) CommitsWithDeadLetters(ctx context.Context, snapshotID int64, tp mapping.TopicPartition, offset int64) iter.Seq2[mapping.Commit, error] {
	return t.commitsWhere(ctx, snapshotID, commitFilter{blocks: func(s mapping.Summary) bool {
		ps := s.Parts[tp]
		return ps != nil && ps.DeadLetters > 0 && ps.High > offset
	}})
}

// commitFilter says which commits of the archive commitsWhere yields: the
// zero value, all of them.
type commitFilter struct {
	// deadLetters: only the commits that name this dead-letter table.
	deadLetters string
	// grouped: only the commits that record file groups.
	grouped bool
	// ids: only these commits (nil: any).
	ids map[int64]bool
	// blocks: only the archived blocks of the ledger alone whose summary
	// it accepts (nil: all), so that a reader of some partitions' offsets
	// skips the blocks that hold none.
	blocks func(mapping.Summary) bool
	// summarized: when it returns true for the summary of an archived
	// block of the ledger alone, it took what it needs from the summary,
	// and the block is not read (nil: every block is read).
	summarized func(mapping.Summary) bool
	// took, set by commitsWhere: whether a block of these commits may be
	// taken by its summary (none of them yielded yet), and noting them
	// yielded when it is.
	took func(ids []int64, s mapping.Summary) bool
}

// maxLedgerReloads is how many times a reader of the ledger reloads the
// table when a file of its archive that the loaded metadata names is not
// found: another writer's expiry may have merged it into a new segment and
// deleted it (reloadingOnAbsorbed).
const maxLedgerReloads = 5

// commitsWhere is Commits yielding, of the archive, only the commits f
// accepts; the commits of live snapshots are all yielded (they are few,
// and one whose ranges are in a ranges file shows its other properties
// only there), so the caller checks what it gets. An archived block none
// of whose commits f accepts is not read: a reader of the few commits
// that name something pays for those and the live ones alone.
func (t *Table) commitsWhere(ctx context.Context, snapshotID int64, f commitFilter) iter.Seq2[mapping.Commit, error] {
	return func(yield func(mapping.Commit, error) bool) {
		id, err := t.resolve(snapshotID)
		if err != nil || id == 0 {
			if err != nil {
				yield(mapping.Commit{}, err)
			}
			return
		}
		// A segment named by the metadata this table loaded may be
		// deleted meanwhile by another writer's expiry, which merged it
		// into a new one: the table is then reloaded and the walk goes
		// on, past the commits already yielded (the ancestry, and so the
		// order, is the same). A long walk beside a busy sink (a
		// scheduled compaction's, seconds long, beside expiries every
		// second) may see that more than once (the soak: one compaction
		// in five failed after a single reload).
		yielded := map[int64]bool{}
		if sum := f.summarized; sum != nil {
			// A walk again after a reload must not meet a block taken by
			// its summary twice, nor its commits again one by one.
			f.took = func(ids []int64, s mapping.Summary) bool {
				if slices.ContainsFunc(ids, func(id int64) bool { return yielded[id] }) || !sum(s) {
					return false
				}
				for _, id := range ids {
					yielded[id] = true
				}
				return true
			}
		}
		err = t.reloadingOnAbsorbed(ctx, func() error {
			stopped, err := t.walkCommits(ctx, id, f, func(c mapping.Commit) bool {
				if yielded[c.SnapshotID] {
					return true
				}
				yielded[c.SnapshotID] = true
				return yield(c, nil)
			})
			if stopped {
				return nil
			}
			return err
		})
		if err != nil {
			yield(mapping.Commit{}, err)
		}
	}
}

// reloadingOnAbsorbed runs read, reloading the table and running it again
// (up to maxLedgerReloads times) while it fails because a file of the
// archive that the loaded metadata names is gone: another writer's expiry
// merged it into a new segment and deleted it.
func (t *Table) reloadingOnAbsorbed(ctx context.Context, read func() error) error {
	for reloads := 0; ; reloads++ {
		err := read()
		if err == nil || reloads == maxLedgerReloads || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if rerr := t.Refresh(ctx); rerr != nil {
			return fmt.Errorf("%w (reloading the table after it: %w)", err, rerr)
		}
	}
}

// walkCommits calls fn with the commits of id's ledger that f accepts
// (commitsWhere), as the table is loaded; stopped reports that fn asked
// to stop.
func (t *Table) walkCommits(ctx context.Context, id int64, f commitFilter, fn func(mapping.Commit) bool) (stopped bool, err error) {
	parts, err := t.ledgerParts(id)
	if err != nil {
		return false, err
	}
	var fsys iceio.IO
	bySummary := f.blocks != nil || f.took != nil
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if bySummary && p.snap == nil {
			if end, whole := segmentRun(parts, i); whole {
				if f.skips(parts[i:end], p.at.ix.Summary.Summary) {
					i = end - 1
					continue
				}
			}
		}
		if f.deadLetters != "" || f.grouped || f.ids != nil {
			if p = p.only(f); p.snap == nil && len(p.ids) == 0 {
				continue
			}
		}
		if bySummary && p.snap == nil && p.whole {
			s, err := t.blockSummary(ctx, &fsys, p.at)
			if err != nil {
				return false, err
			}
			if f.skips([]ledgerPart{p}, s) {
				continue
			}
		}
		cs, err := t.decode(ctx, &fsys, p)
		if err != nil {
			return false, err
		}
		for _, c := range cs {
			if !fn(c) {
				return true, nil
			}
		}
	}
	return false, nil
}

// skips reports whether f's block filters leave out the whole archived
// parts whose summary is s: none of them is of the blocks f reads, or f
// took them by s.
func (f commitFilter) skips(parts []ledgerPart, s mapping.Summary) bool {
	if f.blocks != nil && !f.blocks(s) {
		return true
	}
	if f.took == nil {
		return false
	}
	var ids []int64
	for _, p := range parts {
		ids = append(ids, p.commitIDs()...)
	}
	return f.took(ids, s)
}

// ReadLedger decodes the whole ledger as of a snapshot (0: the branch
// head). It holds every range: readers that can, use Commits, Summary or
// Locate.
func (t *Table) ReadLedger(ctx context.Context, snapshotID int64) (mapping.Ledger, error) {
	var l mapping.Ledger
	for c, err := range t.Commits(ctx, snapshotID) {
		if err != nil {
			return mapping.Ledger{}, err
		}
		l.Commits = append(l.Commits, c)
	}
	return l, nil
}

// Ledger decodes the ledger of the table's branch as last loaded: the floe
// commits in the branch's ancestry, oldest first, expired ones read from
// the ledger archive. Snapshots without floe properties (other writers,
// maintenance) are skipped; a malformed floe property is a
// *mapping.MalformedError. It is ReadLedger of the head without a
// caller's context, for callers that need every range at once.
func (t *Table) Ledger() (mapping.Ledger, error) {
	return t.ReadLedger(context.Background(), 0)
}

// LedgerAt decodes the table's ledger as of one of its snapshots
// (ReadLedger without a caller's context).
func (t *Table) LedgerAt(snapshotID int64) (mapping.Ledger, error) {
	if _, err := t.Snapshot(snapshotID); err != nil {
		return mapping.Ledger{}, err
	}
	return t.ReadLedger(context.Background(), snapshotID)
}

// Summary returns the summary of the ledger as of a snapshot (0: the
// branch head): what the ledger says per partition and topic, folded from
// the archive's block summaries and the live snapshots, reading a block
// only where a summary cannot stand for it (a block shared with another
// branch). The head's is kept and extended by the commits on top of it, so
// a writer pays per commit for that commit only.
//
// Like every reader of the archive, it reloads the table and reads again
// when a segment the loaded metadata names is gone (reloadingOnAbsorbed).
func (t *Table) Summary(ctx context.Context, snapshotID int64) (s mapping.Summary, err error) {
	err = t.reloadingOnAbsorbed(ctx, func() error {
		s, err = t.loadedSummary(ctx, snapshotID)
		return err
	})
	return s, err
}

// SummaryOf is Summary as of snapshot id, which may have expired: its
// commit is then in the ledger archive, and the summary is folded from the
// ledger's commits up to it. A snapshot neither the table nor its ledger
// has is an *UnknownSnapshotError.
func (t *Table) SummaryOf(ctx context.Context, id int64) (mapping.Summary, error) {
	if t.tbl.Metadata().SnapshotByID(id) != nil {
		return t.Summary(ctx, id)
	}
	var s mapping.Summary
	for c, err := range t.Commits(ctx, 0) {
		if err != nil {
			return mapping.Summary{}, err
		}
		s.Add(c)
		if c.SnapshotID == id {
			return s, nil
		}
	}
	return mapping.Summary{}, &UnknownSnapshotError{Table: t.Name(), SnapshotID: id}
}

// loadedSummary is Summary as the table is loaded.
func (t *Table) loadedSummary(ctx context.Context, snapshotID int64) (mapping.Summary, error) {
	id, err := t.resolve(snapshotID)
	if err != nil || id == 0 {
		return mapping.Summary{}, err
	}
	head := t.Head()
	isHead := head != nil && head.SnapshotID == id
	if isHead {
		c := t.summary
		if c != nil && c.location == t.tbl.MetadataLocation() {
			return c.s, nil
		}
		if extend, ok := c.reaches(t.tbl.Metadata(), t.archive, t.archiveSig, head); ok {
			s := c.s
			if extend && head.Summary != nil && mapping.IsFloeCommit(head.Summary.Properties) {
				lc, err := t.ranges.commit(head)
				if err != nil {
					return mapping.Summary{}, err
				}
				s = s.Clone()
				s.Add(lc)
			}
			t.summary = newSummaryCache(t.tbl, head.SnapshotID, t.archiveSig, s)
			return s, nil
		}
	}
	parts, err := t.ledgerParts(id)
	if err != nil {
		return mapping.Summary{}, err
	}
	var s mapping.Summary
	var fsys iceio.IO
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if end, whole := segmentRun(parts, i); whole {
			s.Merge(p.at.ix.Summary.Summary)
			i = end - 1
			continue
		}
		if p.whole {
			bs, err := t.blockSummary(ctx, &fsys, p.at)
			if err != nil {
				return mapping.Summary{}, err
			}
			s.Merge(bs)
			continue
		}
		cs, err := t.decode(ctx, &fsys, p)
		if err != nil {
			return mapping.Summary{}, err
		}
		for _, c := range cs {
			s.Add(c)
		}
	}
	if isHead {
		t.summary = newSummaryCache(t.tbl, id, t.archiveSig, s)
	}
	return s, nil
}

// Locate answers where the ledger as of a snapshot (0: the branch head)
// holds offset of tp, as mapping.Ledger.Where does, reading only the
// archive blocks whose summary spans the offset.
func (t *Table) Locate(ctx context.Context, snapshotID int64, tp mapping.TopicPartition, offset int64) (loc mapping.Location, err error) {
	err = t.reloadingOnAbsorbed(ctx, func() error {
		loc, err = t.locate(ctx, snapshotID, tp, offset)
		return err
	})
	return loc, err
}

// locate is Locate as the table is loaded.
func (t *Table) locate(ctx context.Context, snapshotID int64, tp mapping.TopicPartition, offset int64) (mapping.Location, error) {
	loc := mapping.Location{TopicPartition: tp, Offset: offset, Status: mapping.StatusUnsunk}
	sum, err := t.loadedSummary(ctx, snapshotID)
	if err != nil {
		return loc, err
	}
	ps, ok := sum.Partition(tp)
	if !ok {
		return loc, nil
	}
	loc.Known, loc.First, loc.Next = true, ps.First(), ps.Next()
	if !ps.Span().Contains(offset) {
		return loc, nil
	}
	id, err := t.resolve(snapshotID)
	if err != nil {
		return loc, err
	}
	parts, err := t.ledgerParts(id)
	if err != nil {
		return loc, err
	}
	var fsys iceio.IO
	holds := func(s mapping.Summary) bool {
		ps, ok := s.Partition(tp)
		return ok && ps.Span().Contains(offset)
	}
	// within, in a whole segment whose partition directory was read, are
	// its blocks whose span of tp holds offset; nil elsewhere.
	var within map[int]bool
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if p.snap != nil || startsRun(parts, i) {
			within = nil
			end, whole := segmentRun(parts, i)
			if whole && !holds(p.at.ix.Summary.Summary) {
				i = end - 1
				continue
			}
			if whole {
				spans, ok, err := t.partitionSpans(ctx, &fsys, p.at, tp)
				if err != nil {
					return loc, err
				}
				if ok {
					within = map[int]bool{}
					for _, s := range spans {
						if s.span().Contains(offset) {
							within[s.block()] = true
						}
					}
				}
			}
		}
		switch {
		case within != nil:
			if !within[p.at.block] {
				continue
			}
		case p.snap == nil && p.whole:
			bs, err := t.blockSummary(ctx, &fsys, p.at)
			if err != nil {
				return loc, err
			}
			if !holds(bs) {
				continue
			}
		}
		cs, err := t.decode(ctx, &fsys, p)
		if err != nil {
			return loc, err
		}
		if w := (mapping.Ledger{Commits: cs}).Where(tp, offset); w.Status != mapping.StatusUnsunk {
			loc.Status, loc.Commit, loc.Range = w.Status, w.Commit, w.Range
			return loc, nil
		}
	}
	return loc, nil
}

// FirstCovering is mapping.Ledger.FirstCovering on the ledger as of a
// snapshot (0: the branch head), reading only the archive block where the
// cut is reached.
func (t *Table) FirstCovering(ctx context.Context, snapshotID int64, cut mapping.Cut) (c mapping.Commit, err error) {
	err = t.reloadingOnAbsorbed(ctx, func() error {
		c, err = t.firstCovering(ctx, snapshotID, cut)
		return err
	})
	return c, err
}

// firstCovering is FirstCovering as the table is loaded.
func (t *Table) firstCovering(ctx context.Context, snapshotID int64, cut mapping.Cut) (mapping.Commit, error) {
	sum, err := t.loadedSummary(ctx, snapshotID)
	if err != nil {
		return mapping.Commit{}, err
	}
	need, err := mapping.CoverageNeeded(sum, cut)
	if err != nil {
		return mapping.Commit{}, err
	}
	id, err := t.resolve(snapshotID)
	if err != nil {
		return mapping.Commit{}, err
	}
	parts, err := t.ledgerParts(id)
	if err != nil {
		return mapping.Commit{}, err
	}
	next := map[mapping.TopicPartition]int64{}
	var fsys iceio.IO
	// pass folds the ranges summarised by s into next, unless they reach
	// every needed offset: the commit is among them.
	pass := func(s mapping.Summary) bool {
		if reached(need, next, s) {
			return false
		}
		for tp, ps := range s.Parts {
			next[tp] = max(next[tp], ps.High)
		}
		return true
	}
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		end, whole := segmentRun(parts, i)
		if whole && pass(p.at.ix.Summary.Summary) {
			i = end - 1
			continue
		}
		// The segment holds the commit. Its partition directory names
		// the block, when there are fewer needed partitions to read it
		// for than blocks' summaries to read instead.
		if whole && len(need) < end-i {
			first, ok, err := t.reachingBlock(ctx, &fsys, p.at, need, next)
			if err != nil {
				return mapping.Commit{}, err
			}
			for ok && i < end-1 && parts[i].at.block < first {
				i++
			}
			p = parts[i]
		}
		if p.whole {
			bs, err := t.blockSummary(ctx, &fsys, p.at)
			if err != nil {
				return mapping.Commit{}, err
			}
			if pass(bs) {
				continue
			}
		}
		cs, err := t.decode(ctx, &fsys, p)
		if err != nil {
			return mapping.Commit{}, err
		}
		for _, c := range cs {
			for _, r := range c.Ranges {
				next[r.TopicPartition] = max(next[r.TopicPartition], r.High)
			}
			if reached(need, next, mapping.Summary{}) {
				return c, nil
			}
		}
	}
	// Unreachable: every needed offset is at most the partition's Next.
	return mapping.Commit{}, fmt.Errorf("no commit covers %s", cut)
}

// StateAt is mapping.Ledger.StateAt on the ledger as of a snapshot (0:
// the branch head): it passes the archive's segments and blocks by their
// summaries up to the one that reaches past the cut, and reads that block
// and the one that last moved the cut's partitions before it.
func (t *Table) StateAt(ctx context.Context, snapshotID int64, cut mapping.Cut) (b mapping.Boundary, err error) {
	err = t.reloadingOnAbsorbed(ctx, func() error {
		b, err = t.stateAt(ctx, snapshotID, cut)
		return err
	})
	return b, err
}

// stateAt is StateAt as the table is loaded.
func (t *Table) stateAt(ctx context.Context, snapshotID int64, cut mapping.Cut) (mapping.Boundary, error) {
	sum, err := t.loadedSummary(ctx, snapshotID)
	if err != nil {
		return mapping.Boundary{}, err
	}
	f, err := mapping.NewStateFinder(sum, cut)
	if err != nil {
		return mapping.Boundary{}, err
	}
	id, err := t.resolve(snapshotID)
	if err != nil {
		return mapping.Boundary{}, err
	}
	parts, err := t.ledgerParts(id)
	if err != nil {
		return mapping.Boundary{}, err
	}
	var fsys iceio.IO
	// moved is the last run of parts passed by its summary that moved
	// the cut's partitions, and the search's state before it.
	var moved struct {
		from, to int
		at       mapping.Cut
		empty    bool
	}
	pass := func(s mapping.Summary, from, to int) bool {
		at, empty := f.State()
		passed, m := f.Pass(s)
		if m {
			moved.from, moved.to, moved.at, moved.empty = from, to, at, empty
		}
		return passed
	}
	add := func(p ledgerPart, g *mapping.StateFinder) (bool, error) {
		cs, err := t.decode(ctx, &fsys, p)
		if err != nil {
			return false, err
		}
		for _, c := range cs {
			if !g.Add(c) {
				return false, nil
			}
		}
		return true, nil
	}
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if end, whole := segmentRun(parts, i); whole && pass(p.at.ix.Summary.Summary, i, end) {
			i = end - 1
			continue
		}
		if p.whole {
			bs, err := t.blockSummary(ctx, &fsys, p.at)
			if err != nil {
				return mapping.Boundary{}, err
			}
			if pass(bs, i, i+1) {
				continue
			}
		}
		more, err := add(p, f)
		if err != nil {
			return mapping.Boundary{}, err
		}
		if !more {
			break
		}
	}
	if !f.Pending() {
		return f.Boundary(), nil
	}
	// The boundary's commit is in the run last passed that moved the
	// cut's partitions: read again its last block that moved them.
	at, empty := moved.at, moved.empty
	last, lastAt, lastEmpty := moved.from, at, empty
	for j := moved.from; moved.to-moved.from > 1 && j < moved.to; j++ {
		bs, err := t.blockSummary(ctx, &fsys, parts[j].at)
		if err != nil {
			return mapping.Boundary{}, err
		}
		g := f.Resume(at, empty)
		if _, m := g.Pass(bs); m {
			last, lastAt, lastEmpty = j, at, empty
		}
		at, empty = g.State()
	}
	g := f.Resume(lastAt, lastEmpty)
	if _, err := add(parts[last], g); err != nil {
		return mapping.Boundary{}, err
	}
	f.Settle(g)
	return f.Boundary(), nil
}

// reachingBlock returns the first block of at's segment by the end of
// which every needed offset is reached, from the segment's partition
// directory (the needed partitions' lines), and raises next by the
// blocks before it. ok is false, and next unchanged, when the index has
// no directory or the segment does not reach every needed offset.
func (t *Table) reachingBlock(ctx context.Context, fsys *iceio.IO, at archivedAt, need, next map[mapping.TopicPartition]int64) (first int, ok bool, err error) {
	spans := map[mapping.TopicPartition][]blockSpan{}
	for tp, o := range need {
		if next[tp] >= o {
			continue
		}
		s, ok, err := t.partitionSpans(ctx, fsys, at, tp)
		if err != nil || !ok {
			return 0, false, err
		}
		n, reaches := next[tp], false
		for _, b := range s {
			if n = max(n, b.span().High); n >= o {
				first, reaches = max(first, b.block()), true
				break
			}
		}
		if !reaches {
			return 0, false, nil
		}
		spans[tp] = s
	}
	for tp, s := range spans {
		for _, b := range s {
			if b.block() < first {
				next[tp] = max(next[tp], b.span().High)
			}
		}
	}
	return first, true, nil
}

// reached reports whether every needed offset is reached by next, with the
// ranges summarised by s added.
func reached(need, next map[mapping.TopicPartition]int64, s mapping.Summary) bool {
	for tp, o := range need {
		n := next[tp]
		if ps, ok := s.Partition(tp); ok {
			n = max(n, ps.High)
		}
		if n < o {
			return false
		}
	}
	return true
}

// summaryCache is a ledger summary and the metadata it was computed from:
// Summary folds in only what a later head adds to it.
type summaryCache struct {
	location string // the metadata file
	head     int64
	archive  string // the archive's signature (segmentsSignature)
	// snapshots are every snapshot of that metadata: a later metadata that
	// lost one (an expiry) has its ancestry checked (reaches), to notice a
	// truncated history.
	snapshots []int64
	s         mapping.Summary
}

func newSummaryCache(tbl *table.Table, head int64, archive string, s mapping.Summary) *summaryCache {
	c := &summaryCache{location: tbl.MetadataLocation(), head: head, archive: archive, s: s}
	for _, sn := range tbl.Metadata().Snapshots() {
		c.snapshots = append(c.snapshots, sn.SnapshotID)
	}
	return c
}

// reaches reports whether the ledger of head, in meta completed from
// archive (whose signature is sig), is c's (head is c's head) or c's plus
// head's entry (extend: head's parent is c's head). Usually meta holds
// every snapshot c was computed from, with the same archive. When
// snapshots were expired since, or the archive changed (an expiry, a
// merge of segments), the ancestry of c's head is walked, without
// decoding anything: if it is still whole, every entry of c is live or
// archived, unchanged (snapshots are immutable), so maintenance costs a
// writer no decoding of the whole history.
func (c *summaryCache) reaches(meta table.Metadata, archive archivedSnapshots, sig string, head *table.Snapshot) (extend, ok bool) {
	if c == nil || c.head == 0 || head == nil {
		return false, false
	}
	extend = head.SnapshotID != c.head
	if extend && (head.ParentSnapshotID == nil || *head.ParentSnapshotID != c.head) {
		return false, false
	}
	if c.archive == sig && !slices.ContainsFunc(c.snapshots, func(id int64) bool { return meta.SnapshotByID(id) == nil }) {
		return extend, true
	}
	return extend, ancestryEnd(meta, archive, c.head) == nil
}

// commitByID returns the commit of the branch's ledger whose id is id,
// and false when there is none. The ancestry is walked on the entries'
// properties (archived ones by the hash of their commit id); only the
// commit found is decoded (its block read when it is archived).
func (t *Table) commitByID(ctx context.Context, id string) (c mapping.Commit, ok bool, err error) {
	err = t.reloadingOnAbsorbed(ctx, func() error {
		c, ok, err = t.findCommit(ctx, id)
		return err
	})
	return c, ok, err
}

// findCommit is commitByID as the table is loaded.
func (t *Table) findCommit(ctx context.Context, id string) (mapping.Commit, bool, error) {
	head := t.Head()
	if head == nil {
		return mapping.Commit{}, false, nil
	}
	parts, err := t.ledgerParts(head.SnapshotID)
	if err != nil {
		return mapping.Commit{}, false, err
	}
	var fsys iceio.IO
	hash := commitHash(id)
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if p.snap != nil {
			if p.snap.Summary.Properties[mapping.KeyCommitID] != id {
				continue
			}
		} else {
			b := p.at.ix.Blocks[p.at.block]
			// A whole part's commits are its block's floe commits.
			if !slices.ContainsFunc(p.at.ix.entries[b.First:b.First+b.Count], func(e archivedEntry) bool {
				return e.commit == hash && (p.whole && e.floeCommit() || slices.Contains(p.ids, e.id))
			}) {
				continue
			}
		}
		cs, err := t.decode(ctx, &fsys, p)
		if err != nil {
			return mapping.Commit{}, false, err
		}
		for _, c := range cs {
			if c.ID == id {
				return c, true, nil
			}
		}
	}
	return mapping.Commit{}, false, nil
}

// namedDeadLetterTables returns the dead-letter tables that the commits of
// every branch's ledger name. Archived commits' are what the table holds
// of their entries (archivedEntry), live ones decoded: nothing of the
// archive is read. Below a branch's live snapshots it takes the archive's
// memoized walk (archiveIndex.tail): a writer's maintenance asks at every
// run.
func (t *Table) namedDeadLetterTables() (map[string]bool, error) {
	meta := t.tbl.Metadata()
	names := map[string]bool{}
	for name, ref := range meta.Refs() {
		if ref.SnapshotRefType != table.BranchRef {
			continue
		}
		if err := t.branchDeadLetterTables(meta, ref.SnapshotID, names); err != nil {
			return nil, fmt.Errorf("branch %s: %w", name, err)
		}
	}
	return names, nil
}

// branchDeadLetterTables adds to names the dead-letter tables that the
// commits of the ledger as of head name.
func (t *Table) branchDeadLetterTables(meta table.Metadata, head int64, names map[string]bool) error {
	live := func(s *table.Snapshot) error {
		if s.Summary == nil || !mapping.IsFloeCommit(s.Summary.Properties) {
			return nil
		}
		c, err := t.ranges.commit(s)
		if err != nil {
			return err
		}
		if c.DeadLetterTable != "" {
			names[c.DeadLetterTable] = true
		}
		return nil
	}
	id, _, done, err := liveAncestors(meta, head, live)
	if err != nil || done {
		return err
	}
	if tail, pure := t.archive.tail(meta, id); pure && tail.complete {
		for _, n := range tail.deadLetters {
			names[n] = true
		}
		return nil
	}
	ancestors, te := ancestry(meta, t.archive, head)
	if te != nil {
		te.Table = t.Name()
		return te
	}
	for _, s := range ancestors {
		if meta.SnapshotByID(s.SnapshotID) != nil {
			if err := live(&s); err != nil {
				return err
			}
		} else if _, at, ok := t.archive.find(s.SnapshotID); ok {
			if n := at.ix.deadLetterTable(at.block, at.entry); n != "" {
				names[n] = true
			}
		}
	}
	return nil
}

// LostRanges returns the ranges the ledger as of a snapshot (0: the
// branch head) records as lost, for the partitions of tps whose summary
// sum does not say that their ranges tile their span
// (mapping.PartitionSummary.Tiled): the ledger is read only for those,
// and not at all when there are none.
func (t *Table) LostRanges(ctx context.Context, snapshotID int64, sum mapping.Summary, tps []mapping.TopicPartition) (map[mapping.TopicPartition][]mapping.Interval, error) {
	want := map[mapping.TopicPartition]bool{}
	for _, tp := range tps {
		if ps, ok := sum.Partition(tp); ok && !ps.Tiled {
			want[tp] = true
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	out := map[mapping.TopicPartition][]mapping.Interval{}
	for c, err := range t.Commits(ctx, snapshotID) {
		if err != nil {
			return nil, fmt.Errorf("read the ledger of %s: %w", t.Name(), err)
		}
		for _, r := range c.Ranges {
			if r.Lost && want[r.TopicPartition] {
				out[r.TopicPartition] = append(out[r.TopicPartition], r.Interval)
			}
		}
	}
	return out, nil
}

// HeldFirst returns, for every partition of the ledger as of a snapshot
// (0: the branch head), whose summary is sum, where the ledger's own
// records begin (mapping.Summary.HeldFirst, from LostRanges). A published
// replay from earliest records what retention deleted since main sank it
// as lost, so main's history no longer holds rows main held there
// (review s67).
func (t *Table) HeldFirst(ctx context.Context, snapshotID int64, sum mapping.Summary) (map[mapping.TopicPartition]int64, error) {
	lost, err := t.LostRanges(ctx, snapshotID, sum, sum.Partitions())
	if err != nil {
		return nil, err
	}
	return sum.HeldFirst(lost), nil
}
