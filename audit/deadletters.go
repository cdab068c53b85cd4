package audit

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// deadLetterTable is what the audit knows of one dead-letter table of the
// audited table.
type deadLetterTable struct {
	name string
	tbl  *snapshot.Table // nil when it does not exist
	// named is set when the audited ledger's commits name it.
	named bool
	// state compares its rows with the ledgers (files level).
	state *snapshot.DeadLetterState
	// audited are the ids of the audited ledger's commits that name it
	// (auditedIDs).
	audited map[string]bool
}

// openDeadLetters opens the dead-letter tables of the audited table: those
// its ledger's commits name (a missing one is a finding at the ledger
// level), and whatever the ledger names, the others it has
// (snapshot.Table.DeadLetterTables: the default one, those it recorded),
// whose rows must all belong to a live commit too.
func (a *auditor) openDeadLetters(ctx context.Context) error {
	a.deadTables = map[string]*deadLetterTable{}
	for name := range a.deadNames {
		a.deadTables[name] = &deadLetterTable{name: name, named: true}
	}
	dlqs, err := a.tbl.DeadLetterTables(ctx)
	if err != nil {
		return err
	}
	for _, dlq := range dlqs {
		d := a.deadTables[dlq.Name()]
		if d == nil {
			d = &deadLetterTable{name: dlq.Name()}
			a.deadTables[d.name] = d
		}
		d.tbl = dlq
	}
	for _, name := range slices.Sorted(maps.Keys(a.deadTables)) {
		if _, err := catalog.ParseIdent(name); err != nil {
			return fmt.Errorf("the ledger of %s names dead-letter table %q: %w", a.tbl.Name(), name, err)
		}
	}
	return nil
}

// deadLetterLedger reports the dead-letter tables the ledger names that
// do not exist, and compares the others with the ledgers (deadLetterState).
func (a *auditor) deadLetterLedger(ctx context.Context) error {
	a.deadBad = map[int64]bool{}
	for _, name := range slices.Sorted(maps.Keys(a.deadTables)) {
		d := a.deadTables[name]
		if d.tbl != nil {
			continue
		}
		for _, c := range a.commitsOf(d) {
			a.deadBad[c.SnapshotID] = true
		}
		a.find(Finding{Level: LevelLedger, Kind: KindMissingFile,
			Detail: fmt.Sprintf("the ledger lists dead letters in table %s, which does not exist", name)})
	}
	// A commit counting dead letters in no table was compared with
	// nothing: complete at the default levels (found by review s66).
	for _, c := range a.deadUnnamed {
		a.find(Finding{Level: LevelLedger, Kind: KindCountMismatch, SnapshotID: c[0],
			Detail: fmt.Sprintf("snapshot %d counts %d dead letters but names no dead-letter table and no dead-letter file: those records are in no table", c[0], c[1])})
	}
	return a.deadLetterState(ctx)
}

// deadLetterState compares each dead-letter table's rows (their commit
// ids: dead letters are few, and only that column and the position are
// read, so the ledger level does it too) with the commits that the ledgers of the table's branches
// and tags name for it, as reconciling does (snapshot.DeadLetterState): a commit
// without rows is pending when reconciling would add its files, or
// missing when they are gone; rows of a commit no ledger has are stray;
// a commit's rows must be as many as its dead letters.
func (a *auditor) deadLetterState(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(a.deadTables)) {
		d := a.deadTables[name]
		if d.tbl == nil {
			continue // the ledger level reported it
		}
		st, err := a.tbl.DeadLetterState(ctx, d.tbl)
		if err != nil {
			return err
		}
		if len(st.Stale) > 0 {
			if err := a.withoutNewer(ctx, d, st); err != nil {
				return err
			}
		}
		d.state = st
		// The commits of other branches' ledgers are theirs to audit:
		// a branch audited before its publish is not judged by main's.
		audited := a.auditedIDs(d)
		judged := func(c mapping.Commit) bool { return audited[c.ID] && a.selectedCommit(c) }
		// A commit without rows whose files are all files of the table
		// its storage lost (the sink adds a commit's own files) is the
		// same fault as those files: their findings name it, rather than
		// a finding of its own counting the one deleted file twice.
		inLost := func(c mapping.Commit) bool {
			return d.named && judged(c) && !slices.ContainsFunc(c.DeadLetterFiles, func(p string) bool { return !slices.Contains(st.Lost, p) })
		}
		for _, path := range st.Lost {
			if !d.named {
				continue
			}
			held, drop := "the dead letters in it are lost", "(the audit then names the commits whose dead letters it held)"
			var of []string
			for _, c := range st.Missing {
				if inLost(c) && slices.Contains(c.DeadLetterFiles, path) {
					of = append(of, fmt.Sprintf("commit %s (snapshot %d), %s", c.ID, c.SnapshotID, plural(deadLetterCount(c), "dead letter")))
				}
			}
			if len(of) > 0 {
				held = fmt.Sprintf("the dead letters in it are lost, those of %s, whose own files are gone with it: nothing can add them,", strings.Join(of, "; "))
				drop = "and records them as lost (dead-letters-lost; a replay of the table gets them back)"
			}
			a.find(Finding{Level: LevelLedger, Kind: KindMissingFile, File: path,
				Detail: fmt.Sprintf("dead-letter table %s lists data file %s, which its storage no longer has (deleted outside floe): %s and no reader can scan %s; restore the file, or floe maintain --table %s --drop-missing-dead-letter-files removes it %s",
					name, path, held, name, a.tbl.Name(), drop)})
		}
		adds := "the next floe sink session or floe maintain adds them"
		if len(st.Lost) > 0 {
			adds = "floe maintain adds them once the lost files are restored or dropped (the lost ones may hold them)"
		}
		for _, c := range st.Pending {
			if !judged(c) {
				continue
			}
			a.deadBad[c.SnapshotID] = true
			a.find(Finding{Level: LevelLedger, Kind: KindDeadLettersPending, File: c.DeadLetterFiles[0], SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("commit %s (snapshot %d) counts %d dead letters that are not in %s yet; its %d dead-letter files are there: %s",
					c.ID, c.SnapshotID, deadLetterCount(c), name, len(c.DeadLetterFiles), adds)})
		}
		for _, c := range st.Missing {
			if !judged(c) {
				continue
			}
			a.deadBad[c.SnapshotID] = true
			if inLost(c) {
				continue // named by the finding of its lost files
			}
			a.find(Finding{Level: LevelLedger, Kind: KindMissingFile, File: c.DeadLetterFiles[0], SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("commit %s (snapshot %d) counts %d dead letters that are in no row of %s, and its dead-letter files are gone (deleted outside floe): nothing can add them; restore the files, or replay the table (floe maintain --table %s --drop-missing-dead-letter-files records them as lost, so that maintenance passes)",
					c.ID, c.SnapshotID, deadLetterCount(c), name, a.tbl.Name())})
		}
		for _, c := range st.GivenUp {
			if !judged(c) {
				continue
			}
			a.deadBad[c.SnapshotID] = true
			a.find(Finding{Level: LevelLedger, Kind: KindDeadLettersLost, SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("commit %s (snapshot %d) counts %d dead letters; %d of them are lost: their files were gone and floe maintain --drop-missing-dead-letter-files recorded them as lost (%s holds %d rows of the commit); replay the table to get them back",
					c.ID, c.SnapshotID, deadLetterCount(c), deadLetterCount(c)-st.Rows[c.ID], name, st.Rows[c.ID])})
		}
		for _, c := range st.CountMismatches() {
			if !judged(c) {
				continue
			}
			a.deadBad[c.SnapshotID] = true
			fix := "the dead-letter table was changed outside floe, and floe maintain cannot repair it"
			switch {
			case slices.ContainsFunc(st.Doubled, func(d mapping.Commit) bool { return d.ID == c.ID }):
				fix = "an older floe added them twice: the next floe sink session or floe maintain replaces them by the commit's files"
			case st.Repairs(c.ID) && len(st.Lost) > 0:
				fix = fmt.Sprintf("some may be in the files %s lost: restore them, or floe maintain --table %s --drop-missing-dead-letter-files drops them, after which the commit's rows are replaced by its files, which are there",
					name, a.tbl.Name())
			case st.Repairs(c.ID):
				fix = "some of its rows are gone (a file the storage lost was dropped, or rows were deleted outside floe), and the commit's files are there: the next floe sink session or floe maintain replaces its rows by them"
			}
			a.find(Finding{Level: LevelLedger, Kind: KindCountMismatch, SnapshotID: c.SnapshotID,
				Detail: fmt.Sprintf("commit %s (snapshot %d) counts %d dead letters; %s holds %d rows of it: %s", c.ID, c.SnapshotID, deadLetterCount(c), name, st.Rows[c.ID], fix)})
		}
		if len(st.Stale) > 0 || len(st.StaleLegacy) > 0 {
			n := st.StaleRows
			for _, offs := range st.StaleLegacy {
				n += int64(len(offs))
			}
			a.find(Finding{Level: LevelLedger, Kind: KindStrayDeadLetters,
				Detail: fmt.Sprintf("%s holds %d dead letters of commits that no branch's or tag's ledger has (%d commits: rolled back, or replaced by a published branch): the next floe sink session or floe maintain removes them",
					name, n, max(len(st.Stale), 1))})
		}
	}
	return nil
}

// withoutNewer judges st's stale rows again against the table as it is
// now, read after d's rows were: the audited table was loaded before d,
// so rows of a commit made in between name a commit its ledgers do not
// have. st keeps only the rows of commits in no ledger of the table now
// (as reconciling reads them); the rows level skips the others, as it
// skips every row of a commit the audited ledger does not have.
func (a *auditor) withoutNewer(ctx context.Context, d *deadLetterTable, st *snapshot.DeadLetterState) error {
	now, err := snapshot.Open(ctx, a.tbl.Catalog(), a.tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		return fmt.Errorf("reload %s to judge the rows of %s that name commits it did not have: %w", a.tbl.Name(), d.name, err)
	}
	fresh, err := now.DeadLetterState(ctx, d.tbl)
	if err != nil {
		return err
	}
	st.Stale, st.StaleRows, st.StaleLegacy = fresh.Stale, fresh.StaleRows, fresh.StaleLegacy
	return nil
}

// selectedCommit reports whether one of c's ranges with dead letters is of
// a selected topic.
func (a *auditor) selectedCommit(c mapping.Commit) bool {
	return slices.ContainsFunc(c.Ranges, func(r mapping.Range) bool { return r.DeadLetters > 0 && a.selected(r.Topic) })
}

// deadLetterCount is the number of dead letters c's ranges count.
func deadLetterCount(c mapping.Commit) int64 {
	var n int64
	for _, r := range c.Ranges {
		n += r.DeadLetters
	}
	return n
}

// auditedIDs returns the ids of commitsOf(d), the rows of d that are the
// audited ledger's to judge, made once.
func (a *auditor) auditedIDs(d *deadLetterTable) map[string]bool {
	if d.audited == nil {
		d.audited = map[string]bool{}
		for _, c := range a.commitsOf(d) {
			d.audited[c.ID] = true
		}
	}
	return d.audited
}

// commitsOf lists the commits that put dead letters into d, in ledger order.
func (a *auditor) commitsOf(d *deadLetterTable) []*mapping.Commit {
	var out []*mapping.Commit
	for i := range a.deadCommits {
		if a.deadCommits[i].DeadLetterTable == d.name {
			out = append(out, &a.deadCommits[i])
		}
	}
	return out
}

// deadLetterRows reads the partition and offset columns of the live files
// of the dead-letter tables the ledger names: every dead letter is unique,
// lies in a range with dead letters and is not also a row of the table
// (rows, from the rows level). It records the dead letters' offsets in
// a.deadAt, for deadLetterCount and the content level.
func (a *auditor) deadLetterRows(ctx context.Context, rows map[mapping.TopicPartition]*offsetSet) error {
	a.deadAt = map[mapping.TopicPartition]*offsetSet{}
	dup := map[mapping.TopicPartition]*offsetSet{}
	// The topic column even of a one-topic table, as the rows level reads
	// it: a dead letter naming another topic is not this topic's.
	cols := []string{mapping.ColPartition, mapping.ColOffset, mapping.ColTopic}
	for _, name := range slices.Sorted(maps.Keys(a.deadTables)) {
		d := a.deadTables[name]
		if !d.named || d.tbl == nil || d.tbl.Head() == nil {
			continue // the files level judged the rows of one the ledger does not name
		}
		// Rows of commits the audited ledger does not have are not its
		// to count: a tag's, kept while the tag keeps them (a rollback
		// pinned by a tag, then the same offsets sunk again), or a
		// commit made since the audit loaded the table (withoutNewer),
		// by their commit id, or, without one, by the commit the
		// dead-letter state attributes them to. Rows of no ledger at all
		// are the files level's stray finding.
		dcols := cols
		_, hasIDs := d.tbl.Iceberg().Schema().FindFieldByName(mapping.ColCommitID)
		if hasIDs {
			dcols = append(slices.Clip(cols), mapping.ColCommitID)
		}
		// A file the storage lost is the ledger level's finding
		// (deadLetterState).
		err := d.tbl.ScanFiles(ctx, d.tbl.Head().SnapshotID, snapshot.ScanOptions{Columns: dcols, Concurrency: a.opts.Concurrency, MissingOK: true}, func(fb snapshot.FileBatch) error {
			if fb.Done {
				return nil
			}
			b := fb.Batch
			part, ok1 := column[*array.Int32](b, mapping.ColPartition)
			off, ok2 := column[*array.Int64](b, mapping.ColOffset)
			topic, ok3 := column[*array.String](b, mapping.ColTopic)
			var ids *array.String
			ok4 := true
			if hasIDs {
				ids, ok4 = column[*array.String](b, mapping.ColCommitID)
			}
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return fmt.Errorf("dead-letter file %s: unexpected column types %s", fb.Path, b.Schema())
			}
			for i := range int(b.NumRows()) {
				tp := mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)}
				if !a.deadLetterAudited(d, ids, i, tp, off.Value(i)) {
					continue
				}
				if a.deadAt[tp] == nil {
					a.deadAt[tp], dup[tp] = newOffsetSet(), newOffsetSet()
				}
				if a.deadAt[tp].add(off.Value(i)) {
					dup[tp].add(off.Value(i))
				}
			}
			a.rep.DeadLettersRead += b.NumRows()
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
	for tp, s := range a.deadAt {
		if a.selected(tp.Topic) {
			a.part(tp).DeadLettersRead = s.count(mapping.Interval{Low: 0, High: 1<<63 - 1})
		}
	}
	return nil
}

// deadLetterCount checks that range r of commit c holds exactly its
// dead-letter count in the dead letters deadLetterRows read. The rows
// level calls it in its one pass over the ledger.
func (a *auditor) deadLetterCount(c mapping.Commit, r mapping.Range) {
	if a.deadBad[c.SnapshotID] {
		return // the files level reported its dead-letter files
	}
	var got int64
	if s := a.deadAt[r.TopicPartition]; s != nil {
		got = s.count(r.Interval)
	}
	if got == r.DeadLetters {
		return
	}
	a.find(Finding{Level: LevelRows, Kind: KindCountMismatch, Partition: r.TopicPartition, HasPartition: true,
		Offsets: r.Interval, HasOffsets: true, SnapshotID: c.SnapshotID,
		Detail: fmt.Sprintf("range %s of snapshot %d has %d dead letters in the ledger; the dead-letter tables hold %d distinct offsets in it", r.Interval, c.SnapshotID, r.DeadLetters, got)})
}

// deadLetterAudited reports whether row i of a batch of dead-letter table
// d, at offset o of tp, is a dead letter of the audited ledger: its commit
// id (ids, nil when d has no such column) is one of the audited ledger's
// commits. A row without a commit id (an older floe's) is the commit's
// that reconciling attributes it to: one of a tag's is the tag's. One
// attributed to none is stray (the files level's finding) and counted.
func (a *auditor) deadLetterAudited(d *deadLetterTable, ids *array.String, i int, tp mapping.TopicPartition, o int64) bool {
	audited := a.auditedIDs(d)
	if ids != nil && ids.IsValid(i) {
		return audited[ids.Value(i)]
	}
	if d.state != nil {
		if owner := d.state.LegacyOwner(tp, o); owner != "" && !audited[owner] {
			return false
		}
	}
	return true
}

// inDeadLetterRange reports whether a range of tp with dead letters holds
// offset o.
func (a *auditor) inDeadLetterRange(tp mapping.TopicPartition, o int64) bool {
	cv := a.cover[tp]
	return cv != nil && inSegments(cv.WithDeadLetters(), o)
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
