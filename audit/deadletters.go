package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// deadLetterTable is what the audit knows of one dead-letter table named by
// the ledger's commits.
type deadLetterTable struct {
	name string
	tbl  *snapshot.Table // nil when it does not exist
	// listed maps each file the ledger's commits list for it to the commit.
	listed map[string]*mapping.Commit
	// live are its live data files (files level).
	live []snapshot.DataFile
	// applied are the commits whose dead letters its snapshots added.
	applied map[string]bool
}

// openDeadLetters opens the dead-letter tables the ledger's commits name.
// A missing one is a finding at the files level.
func (a *auditor) openDeadLetters(ctx context.Context) error {
	a.deadTables = map[string]*deadLetterTable{}
	for i := range a.ledger.Commits {
		c := &a.ledger.Commits[i]
		if c.DeadLetterTable == "" {
			continue
		}
		d := a.deadTables[c.DeadLetterTable]
		if d == nil {
			d = &deadLetterTable{name: c.DeadLetterTable, listed: map[string]*mapping.Commit{}}
			a.deadTables[d.name] = d
		}
		for _, p := range c.DeadLetterFiles {
			d.listed[p] = c
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.deadTables)) {
		d := a.deadTables[name]
		ident, err := catalog.ParseIdent(name)
		if err != nil {
			return fmt.Errorf("the ledger of %s names dead-letter table %q: %w", a.tbl.Name(), name, err)
		}
		d.tbl, err = snapshot.OpenDeadLetters(ctx, a.tbl.Catalog(), ident, a.tbl.Name(), false)
		if errors.Is(err, snapshot.ErrTableNotFound) {
			d.tbl = nil
			continue
		}
		if err != nil {
			return fmt.Errorf("open dead-letter table %s: %w", name, err)
		}
		d.applied = map[string]bool{}
		for _, s := range d.tbl.Iceberg().Metadata().Snapshots() {
			if s.Summary != nil && s.Summary.Properties[snapshot.KeyDeadLettersFor] != "" {
				d.applied[s.Summary.Properties[snapshot.KeyDeadLettersFor]] = true
			}
		}
	}
	return nil
}

// deadLetterLedger checks the dead-letter tables' snapshot summaries
// against the ledger: every commit with dead letters has a snapshot of its
// dead-letter table that added them. A commit older than the table's
// oldest snapshot is not judged here (its snapshot may have been expired);
// the files level checks its files.
func (a *auditor) deadLetterLedger() {
	a.deadBad = map[int64]bool{}
	for _, name := range slices.Sorted(maps.Keys(a.deadTables)) {
		d := a.deadTables[name]
		if d.tbl == nil {
			for _, c := range a.commitsOf(d) {
				a.deadBad[c.SnapshotID] = true
			}
			a.find(Finding{Level: LevelLedger, Kind: KindMissingFile,
				Detail: fmt.Sprintf("the ledger lists dead letters in table %s, which does not exist", name)})
			continue
		}
		var oldest time.Time
		for _, s := range d.tbl.Iceberg().Metadata().Snapshots() {
			if t := time.UnixMilli(s.TimestampMs); oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
		for _, c := range a.commitsOf(d) {
			if d.applied[c.ID] || (!oldest.IsZero() && c.CommittedAt.Before(oldest)) {
				continue
			}
			a.deadBad[c.SnapshotID] = true
			a.find(Finding{Level: LevelLedger, Kind: KindDeadLettersPending, SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("commit %s (snapshot %d) counts dead letters that no snapshot of %s added yet: its writer stopped before adding them; the next floe sink session or floe maintain adds them",
					c.ID, c.SnapshotID, name)})
		}
	}
}

// deadLetterRange returns the range of c that holds dead letters of
// partition p at offsets iv.
func deadLetterRange(c *mapping.Commit, p int32, iv mapping.Interval) (mapping.Range, bool) {
	for _, r := range c.Ranges {
		if r.DeadLetters > 0 && r.Partition == p && r.Low <= iv.Low && iv.High <= r.High {
			return r, true
		}
	}
	return mapping.Range{}, false
}

// deadLetterFiles checks the dead-letter tables from manifests: every file
// a commit lists is live there (or the commit's dead letters are still to
// be added: pending), every live file is listed by a commit and lies in one
// of its ranges, and the files of every range hold its dead-letter count.
func (a *auditor) deadLetterFiles(ctx context.Context) error {
	held := newRangeSets()
	unattributed := map[rangeKey]bool{}
	bad := a.deadBad
	for _, name := range slices.Sorted(maps.Keys(a.deadTables)) {
		d := a.deadTables[name]
		if d.tbl == nil {
			continue // the ledger level reported it
		}
		files, err := d.tbl.Files(ctx, 0)
		if err != nil {
			return fmt.Errorf("list the data files of dead-letter table %s: %w", name, err)
		}
		d.live = files
		live := map[string]bool{}
		for _, f := range files {
			live[f.Path] = true
			c := d.listed[f.Path]
			r, ok := mapping.Range{}, false
			if c != nil && f.HasBounds && f.PartitionMin == f.PartitionMax {
				r, ok = deadLetterRange(c, f.PartitionMin, f.Offsets)
			}
			if c == nil && d.tbl.IsCompaction(f.AddedBy) {
				for _, chain := range a.compactedFile(f, held, name) {
					for _, r := range chain {
						unattributed[rangeKey{r.SnapshotID, r.Range}] = true
					}
				}
				continue
			}
			if !ok {
				fd := Finding{Level: LevelFiles, Kind: KindStrayFile, File: f.Path,
					Detail: fmt.Sprintf("dead-letter file of %s is listed by no commit of the ledger, or lies outside its commit's ranges with dead letters: its %d dead letters are not accounted for (a rolled-back commit's, or written by something else)", name, f.Records)}
				if f.HasBounds && f.PartitionMin == f.PartitionMax {
					fd.Partition, fd.HasPartition = a.topicOf(f.PartitionMin), true
					fd.Offsets, fd.HasOffsets = f.Offsets, f.Records > 0
				}
				a.find(fd)
				continue
			}
			held.add(f.Records, rangeKey{c.SnapshotID, r})
		}
		a.compactions(d.tbl)
		for _, c := range a.commitsOf(d) {
			var missing []string
			for _, p := range c.DeadLetterFiles {
				if !live[p] {
					missing = append(missing, p)
				}
			}
			if len(missing) == 0 || bad[c.SnapshotID] || compactedAway(c, held) {
				continue
			}
			bad[c.SnapshotID] = true
			f := Finding{Level: LevelFiles, Kind: KindDeadLettersPending, File: missing[0], SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("commit %s (snapshot %d) lists %d dead-letter files that are not in %s yet: its writer stopped before adding them; the next floe sink session or floe maintain adds them",
					c.ID, c.SnapshotID, len(missing), name)}
			if d.applied[c.ID] {
				f.Kind = KindMissingFile
				f.Detail = fmt.Sprintf("commit %s (snapshot %d) added %d dead-letter files to %s that are no longer live: its dead letters were deleted or overwritten",
					c.ID, c.SnapshotID, len(missing), name)
			}
			a.find(f)
		}
	}
	for _, c := range a.ledger.Commits {
		if bad[c.SnapshotID] {
			continue
		}
		for _, r := range c.Ranges {
			k := rangeKey{c.SnapshotID, r}
			got, joined := held.heldBy(k)
			if r.DeadLetters == 0 || !a.selected(r.Topic) || unattributed[k] || joined || got == r.DeadLetters {
				continue // joined: compacted files hold it with other ranges (below)
			}
			a.find(Finding{Level: LevelFiles, Kind: KindCountMismatch, Partition: r.TopicPartition, HasPartition: true,
				Offsets: r.Interval, HasOffsets: true, SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("range %s of snapshot %d has %d dead letters in the ledger; the dead-letter files hold %d", r.Interval, c.SnapshotID, r.DeadLetters, got)})
		}
	}
	a.joinedCounts(held, true, unattributed, bad, "dead letters")
	return nil
}

// compactedAway reports whether every range of c with dead letters is
// held, with others, by files a compaction wrote: then the files c lists
// were replaced by them, and the count of the ranges they hold together
// is what the files level judges.
func compactedAway(c *mapping.Commit, held *rangeSets) bool {
	found := false
	for _, r := range c.Ranges {
		if r.DeadLetters == 0 {
			continue
		}
		if _, joined := held.heldBy(rangeKey{c.SnapshotID, r}); !joined {
			return false
		}
		found = true
	}
	return found
}

// commitsOf lists the commits that put dead letters into d, in ledger order.
func (a *auditor) commitsOf(d *deadLetterTable) []*mapping.Commit {
	var out []*mapping.Commit
	for i := range a.ledger.Commits {
		if a.ledger.Commits[i].DeadLetterTable == d.name {
			out = append(out, &a.ledger.Commits[i])
		}
	}
	return out
}

// deadLetterRows reads the partition and offset columns of the dead-letter
// tables' live files: every dead letter is unique, lies in a range with
// dead letters, is not also a row of the table (rows, from the rows
// level), and every range holds exactly its dead-letter count. It records
// the dead letters' offsets for the content level.
func (a *auditor) deadLetterRows(ctx context.Context, rows map[mapping.TopicPartition]*offsetSet) error {
	a.deadAt = map[mapping.TopicPartition]*offsetSet{}
	dup := map[mapping.TopicPartition]*offsetSet{}
	withTopic := len(a.topics) > 1
	cols := []string{mapping.ColPartition, mapping.ColOffset}
	if withTopic {
		cols = append(cols, mapping.ColTopic)
	}
	for _, name := range slices.Sorted(maps.Keys(a.deadTables)) {
		d := a.deadTables[name]
		if d.tbl == nil || d.tbl.Head() == nil {
			continue
		}
		err := d.tbl.ScanFiles(ctx, d.tbl.Head().SnapshotID, snapshot.ScanOptions{Columns: cols, Concurrency: a.opts.Concurrency}, func(fb snapshot.FileBatch) error {
			if fb.Done {
				return nil
			}
			b := fb.Batch
			part, ok1 := column[*array.Int32](b, mapping.ColPartition)
			off, ok2 := column[*array.Int64](b, mapping.ColOffset)
			var topic *array.String
			ok3 := true
			if withTopic {
				topic, ok3 = column[*array.String](b, mapping.ColTopic)
			}
			if !ok1 || !ok2 || !ok3 {
				return fmt.Errorf("dead-letter file %s: unexpected column types %s", fb.Path, b.Schema())
			}
			for i := range int(b.NumRows()) {
				tp := a.topicOf(part.Value(i))
				if withTopic {
					tp.Topic = topic.Value(i)
				}
				if a.deadAt[tp] == nil {
					a.deadAt[tp], dup[tp] = newOffsetSet(), newOffsetSet()
				}
				if a.deadAt[tp].add(off.Value(i)) {
					dup[tp].add(off.Value(i))
				}
			}
			a.rep.RowsRead += b.NumRows()
			return nil
		})
		if err != nil {
			return fmt.Errorf("rows level: dead-letter table %s: %w", name, err)
		}
	}
	for _, tp := range slices.SortedFunc(maps.Keys(a.deadAt), mapping.TopicPartition.Compare) {
		seen := a.deadAt[tp]
		for _, iv := range dup[tp].intervals() {
			a.find(Finding{Level: LevelRows, Kind: KindDuplicate, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
				Detail: fmt.Sprintf("offsets %s are held by more than one dead letter", iv)})
		}
		var outside, both []mapping.Interval
		for _, iv := range seen.intervals() {
			for o := iv.Low; o < iv.High; o++ {
				if !a.inDeadLetterRange(tp, o) {
					outside = appendOffset(outside, o)
				}
				if rows[tp] != nil && rows[tp].count(mapping.Interval{Low: o, High: o + 1}) > 0 {
					both = appendOffset(both, o)
				}
			}
		}
		for _, iv := range outside {
			a.find(Finding{Level: LevelRows, Kind: KindOutsideLedger, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
				Detail: fmt.Sprintf("dead letters at offsets %s lie outside every range of the ledger that has dead letters", iv)})
		}
		for _, iv := range both {
			a.find(Finding{Level: LevelRows, Kind: KindDuplicate, Partition: tp, HasPartition: true, Offsets: iv, HasOffsets: true,
				Detail: fmt.Sprintf("offsets %s are both rows of the table and dead letters", iv)})
		}
	}
	for _, c := range a.ledger.Commits {
		if a.deadBad[c.SnapshotID] {
			continue // the files level reported its dead-letter files
		}
		for _, r := range c.Ranges {
			if !a.selected(r.Topic) || r.Deleted() {
				continue
			}
			var got int64
			if s := a.deadAt[r.TopicPartition]; s != nil {
				got = s.count(r.Interval)
			}
			if got == r.DeadLetters {
				continue
			}
			a.find(Finding{Level: LevelRows, Kind: KindCountMismatch, Partition: r.TopicPartition, HasPartition: true,
				Offsets: r.Interval, HasOffsets: true, SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("range %s of snapshot %d has %d dead letters in the ledger; the dead-letter tables hold %d distinct offsets in it", r.Interval, c.SnapshotID, r.DeadLetters, got)})
		}
	}
	for tp, s := range a.deadAt {
		if a.selected(tp.Topic) {
			a.part(tp).DeadLettersRead = s.count(mapping.Interval{Low: 0, High: 1<<63 - 1})
		}
	}
	return nil
}

// inDeadLetterRange reports whether a range of tp with dead letters holds
// offset o.
func (a *auditor) inDeadLetterRange(tp mapping.TopicPartition, o int64) bool {
	return slices.ContainsFunc(a.ranges[tp], func(r mapping.Range) bool { return r.DeadLetters > 0 && r.Contains(o) })
}

// appendOffset adds o to sorted intervals, merging it into the last one
// when adjacent.
func appendOffset(ivs []mapping.Interval, o int64) []mapping.Interval {
	if n := len(ivs); n > 0 && ivs[n-1].High == o {
		ivs[n-1].High++
		return ivs
	}
	return append(ivs, mapping.Interval{Low: o, High: o + 1})
}
