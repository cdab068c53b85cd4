package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	floecat "github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
)

// Dead-letter table properties and summary keys.
const (
	// PropDeadLettersOf marks a dead-letter table with the data table
	// (namespace.name) whose dead letters it holds.
	PropDeadLettersOf = "floe.dead-letters-of"
	// PropDeadLetterTable, on a data table, names (namespace.name) the
	// dead-letter table a sink that names none writes into: a sink that
	// names one (--dlq-table) records it, so that a later run without the
	// flag does not split the dead letters over the default table too.
	PropDeadLetterTable = "floe.dead-letter-table-default"
	// PropDeadLetterTablePrefix, followed by a dead-letter table's name
	// (namespace.name), is a property of a data table for every
	// dead-letter table its commits ever named: a commit records its table
	// there before naming it, so that maintenance and the audit find it
	// even after a rollback past all its commits. A property per table,
	// like the ledger's segments: catalogs apply a commit's properties key
	// by key, so two writers recording different tables at the same head
	// never overwrite each other's.
	PropDeadLetterTablePrefix = "floe.dead-letter-tables."
	// KeyDeadLettersFor, in the summary of a dead-letter table's snapshot,
	// lists (comma-separated) the ids of the data table's commits whose
	// dead letters it adds; KeyDeadLettersRemovedFor those whose dead
	// letters it removes. Both are informative only: which commits a
	// dead-letter table holds is read from its rows (mapping.ColCommitID),
	// never from summaries, which expiry removes. KeyDeadLetterFilesDropped
	// lists the data files that floe maintain dropped because the storage
	// had lost them (MaintainOptions.DropMissingDeadLetterFiles).
	KeyDeadLettersFor         = "floe.dead-letters-for"
	KeyDeadLettersRemovedFor  = "floe.dead-letters-removed-for"
	KeyDeadLetterFilesDropped = "floe.dead-letter-files-dropped"
	// PropDeadLettersLostPrefix, followed by a data table's commit id, is
	// a property of a dead-letter table for every commit whose dead
	// letters floe maintain --drop-missing-dead-letter-files recorded as
	// lost (their files gone, their rows fewer than they count); its value
	// is the rows the table held of the commit then. Reconciling and the
	// sink leave such a commit alone while it is so (DeadLetterState.GivenUp);
	// the audit reports it until a replay replaces the commit.
	PropDeadLettersLostPrefix = "floe.dead-letters-lost."
)

// DeadLetterName is the default dead-letter table of a data table:
// NAMESPACE.TABLE_dlq.
func DeadLetterName(data table.Identifier) table.Identifier {
	out := slices.Clone(data)
	out[len(out)-1] += "_dlq"
	return out
}

// BranchDeadLetterName is the dead-letter table of a replay onto branch
// of a data table: NAMESPACE.TABLE_BRANCH_dlq (characters other than
// letters, digits and underscores made underscores). A branch's dead
// letters stay apart from main's: once the branch is published, its
// commits name this table, and main's dead letters of the commits it
// replaced are removed from the main one (ReconcileDeadLetters).
func BranchDeadLetterName(data table.Identifier, branch string) table.Identifier {
	clean := strings.Map(func(r rune) rune {
		if r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, branch)
	out := slices.Clone(data)
	out[len(out)-1] += "_" + clean + "_dlq"
	return out
}

// OpenDeadLetters opens the dead-letter table ident of the data table
// named of, creating it (mapping.DeadLetterSchema) when create is set. A
// table of that name that is not a dead-letter table is refused. With
// create, a dead-letter table of an older floe gets the
// mapping.ColCommitID column (ReconcileDeadLetters adds it too).
//
// A dead-letter table holds records of the data table's topics that could
// not become rows, with the reason, each row carrying the id of the data
// table's commit whose ledger accounts for it. It is a projection of the
// data table's ledger: it holds exactly the dead letters of the commits
// that the ledgers of the data table's branches name for it
// (ReconcileDeadLetters converges it there).
func OpenDeadLetters(ctx context.Context, cat catalog.Catalog, ident table.Identifier, of string, create bool) (*Table, error) {
	var loc string
	if create && !floecat.HasWarehouse(cat) {
		// A catalog opened without a warehouse (PostgreSQL, Glue) has no
		// place for new tables: a dead-letter table goes beside its data
		// table, so that a sink into an existing table or a replay onto a
		// branch of it (whose dead letters get a table of their own)
		// needs no --warehouse (found by a new user).
		data, err := cat.LoadTable(ctx, identOf(of))
		if err != nil {
			return nil, fmt.Errorf("load table %s, to create its dead-letter table %s beside it: %w", of, strings.Join(ident, "."), err)
		}
		// Not path.Dir, which would make s3:// s3:/.
		dataLoc := strings.TrimSuffix(data.Location(), "/")
		loc = dataLoc[:strings.LastIndexByte(dataLoc, '/')+1] + catalog.TableNameFromIdent(ident)
	}
	t, err := Open(ctx, cat, ident, OpenOptions{
		Create:     create,
		Location:   loc,
		Layout:     mapping.DeadLetterLayout,
		Schema:     mapping.DeadLetterSchema(),
		Properties: map[string]string{PropDeadLettersOf: of},
		// Made with its data table, whose creation is the news.
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		var layout *mapping.LayoutError
		if errors.As(err, &layout) {
			// Not the layout error's own advice, which is how to write
			// records into that table.
			return nil, fmt.Errorf("table %s exists and is not a dead-letter table (its columns are a data table's); name another one (--dlq-table)", layout.Table)
		}
		return nil, err
	}
	if got := t.tbl.Properties()[PropDeadLettersOf]; got != of {
		if got == "" {
			return nil, fmt.Errorf("table %s exists and is not a dead-letter table (it has no %s property); name another one (--dlq-table)", t.Name(), PropDeadLettersOf)
		}
		return nil, fmt.Errorf("table %s holds the dead letters of %s, not of %s; name another one (--dlq-table)", t.Name(), got, of)
	}
	if _, ok := t.tbl.Schema().FindFieldByName(mapping.ColError); !ok {
		return nil, fmt.Errorf("table %s has no %s column: it is not a dead-letter table", t.Name(), mapping.ColError)
	}
	if create {
		// Readers (the audit, lookups) leave an older table as it is.
		if err := t.addCommitIDColumn(ctx); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// addCommitIDColumn adds mapping.ColCommitID to a dead-letter table that
// lacks it (one of a floe before the column), retrying lost races.
func (t *Table) addCommitIDColumn(ctx context.Context) error {
	const maxAttempts = 10
	var lastErr error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if _, ok := t.tbl.Schema().FindFieldByName(mapping.ColCommitID); ok {
			return nil
		}
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return err
			}
			if err := t.Refresh(ctx); err != nil {
				return err
			}
			continue
		}
		txn := t.tbl.NewTransaction()
		f := mapping.CommitIDField(0)
		err := txn.UpdateSchema(true, false).AddColumn([]string{f.Name}, f.Type, f.Doc, false, nil).Commit()
		var tbl *table.Table
		if err == nil {
			tbl, err = txn.Commit(ctx)
		}
		if err == nil {
			return t.adoptCommitted(ctx, tbl)
		}
		if !isConflict(err) {
			return fmt.Errorf("add column %s to dead-letter table %s: %w", mapping.ColCommitID, t.Name(), err)
		}
		lastErr = err
	}
	return fmt.Errorf("add column %s to dead-letter table %s: %w", mapping.ColCommitID, t.Name(), lastErr)
}

// DeadLettersPendingError reports a commit of the data table that is in,
// whose dead letters could not be added to the dead-letter table yet. The
// commit stands: ReconcileDeadLetters, which every sink session runs
// first, and floe maintain add them.
type DeadLettersPendingError struct {
	Table, DeadLetters, Commit string
	Err                        error
}

func (e *DeadLettersPendingError) Error() string {
	return fmt.Sprintf("commit %s to %s is in, but its dead letters are not in %s yet (the next floe sink session, or floe maintain, adds them): %v",
		e.Commit, e.Table, e.DeadLetters, e.Err)
}

func (e *DeadLettersPendingError) Unwrap() error { return e.Err }

// addDeadLetters appends files, the dead letters of the data table's
// commit id, to the dead-letter table t in one snapshot, unless rows of
// that commit are in already (another process reconciled first). The
// first attempt asserts the head t was last loaded at, which precedes the
// commit: if nothing was committed since, nobody added them.
func (t *Table) addDeadLetters(ctx context.Context, log *slog.Logger, id string, files []iceberg.DataFile) error {
	if log == nil {
		log = slog.Default()
	}
	const maxAttempts, maxErrors = 30, 5
	var lastErr error
	errs := 0
	for attempt := 1; attempt <= maxAttempts && errs < maxErrors; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return fmt.Errorf("add dead letters of commit %s to %s: %w (last error: %w)", id, t.Name(), err, lastErr)
			}
			if err := t.Refresh(ctx); err != nil {
				lastErr = err
				errs++
				continue
			}
			in, err := t.HoldsCommit(ctx, id)
			if err != nil {
				lastErr = err
				errs++
				continue
			}
			if in {
				return nil
			}
		}
		txn := t.tbl.NewTransaction()
		err := txn.AssertRefSnapshotID(table.MainBranch)
		if err == nil {
			err = appendFiles(ctx, txn, t.tbl.Metadata().Version(), files, iceberg.Properties{KeyDeadLettersFor: id})
		}
		var tbl *table.Table
		if err == nil {
			tbl, err = txn.Commit(ctx)
		}
		if err == nil {
			return t.adoptCommitted(ctx, tbl)
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		if !isConflict(err) {
			errs++
		}
		log.Info("adding dead letters failed; reloading to retry", "table", t.Name(), "commit", id, "attempt", attempt, "err", err)
	}
	return fmt.Errorf("add dead letters of commit %s to %s: %w", id, t.Name(), lastErr)
}

// HoldsCommit reports whether the head of dead-letter table t has rows of
// the data table's commit id. The filter prunes files by their bounds on
// the commit id column, so this reads few files. (It reads every column of
// them: iceberg-go v0.7.0 fails to read a file with a row filter and a
// selection of columns, "invalid".)
func (t *Table) HoldsCommit(ctx context.Context, id string) (bool, error) {
	found := false
	// A file the storage lost cannot hold the rows of a commit this
	// process just made.
	err := t.ScanFiles(ctx, 0, ScanOptions{Filter: iceberg.EqualTo(iceberg.Reference(mapping.ColCommitID), id), MissingOK: true},
		func(fb FileBatch) error {
			found = found || (fb.Batch != nil && fb.Batch.NumRows() > 0)
			return nil
		})
	if err != nil {
		return false, fmt.Errorf("look for the dead letters of commit %s in %s: %w", id, t.Name(), err)
	}
	return found, nil
}

// Reconciled is what ReconcileDeadLetters did.
type Reconciled struct {
	// Added counts the commits whose pending dead letters it added.
	Added int `json:"added"`
	// Removed counts the commits no longer in any branch's or tag's
	// ledger (the table was rolled back, or a branch published over it,
	// and no tag kept them) whose dead
	// letters it removed from the dead-letter table.
	Removed int `json:"removed"`
	// RemovedLegacy counts the rows without a commit id (written before
	// the column existed) that no commit accounts for, which it removed.
	RemovedLegacy int `json:"removed_legacy,omitempty"`
	// RepairedLegacy counts the commits whose dead letters an older floe
	// doubled (DeadLetterState.Doubled), whose rows it replaced by the
	// commit's files.
	RepairedLegacy int `json:"repaired_legacy,omitempty"`
	// Refilled counts the commits with too few rows whose rows it
	// replaced by the commit's files (DeadLetterState.Short).
	Refilled int `json:"refilled,omitempty"`
	// RecordedLost counts the commits whose dead letters floe maintain
	// --drop-missing-dead-letter-files recorded as lost
	// (DeadLetterState.GivenUp).
	RecordedLost int `json:"recorded_lost,omitempty"`
}

// plus is r and o counted together.
func (r Reconciled) plus(o Reconciled) Reconciled {
	return Reconciled{Added: r.Added + o.Added, Removed: r.Removed + o.Removed, RemovedLegacy: r.RemovedLegacy + o.RemovedLegacy,
		RepairedLegacy: r.RepairedLegacy + o.RepairedLegacy, Refilled: r.Refilled + o.Refilled, RecordedLost: r.RecordedLost + o.RecordedLost}
}

// DeadLetterState compares a dead-letter table's rows with the ledgers of
// its data table's branches (archives included): the commits of those
// ledgers that name the table are the ones whose dead letters it must
// hold, each exactly once.
type DeadLetterState struct {
	// Table is the dead-letter table, SnapshotID the head whose rows were
	// read (0: it had none).
	Table      string
	SnapshotID int64
	// Commits are the commits of the branches' and tags' ledgers that
	// name the table, by id, with
	// only their ranges that count dead letters.
	Commits map[string]mapping.Commit
	// Rows counts the table's rows of each commit of Commits.
	Rows map[string]int64
	// Pending are commits of Commits without rows whose files are all
	// there: reconciling adds them.
	Pending []mapping.Commit
	// Missing are commits of Commits without rows some of whose files are
	// gone (deleted by hand, or by a tool that did not know floe): nothing
	// can add their dead letters.
	Missing []mapping.Commit
	// Stale are the ids of commits in no branch's or tag's ledger whose
	// rows the table holds (rolled back, or replaced by a published
	// branch): reconciling
	// removes them. StaleRows counts those rows.
	Stale     []string
	StaleRows int64
	// StaleLegacy are rows without a commit id (written before the
	// column existed) that no commit's range with dead letters holds, by
	// partition: reconciling removes them.
	StaleLegacy map[mapping.TopicPartition][]int64
	// Lost are the table's data files that its storage no longer has
	// (deleted outside floe): their rows could not be read, so the
	// commits they hold look pending or missing, and reconciling changes
	// nothing until they are restored or dropped
	// (*DeadLetterFilesLostError).
	Lost []string
	// Doubled are commits all of whose rows have no commit id and
	// outnumber the dead letters their ranges count, whose files are all
	// there: an older floe added their dead letters twice (after a
	// rollback whose undo it did not see). Reconciling deletes the rows
	// without a commit id at their positions (doubledAt), which
	// attribution by position gives to that commit alone, and adds its
	// files again, in one commit.
	Doubled   []mapping.Commit
	doubledAt map[mapping.TopicPartition][]int64
	// Short are commits with fewer rows than the dead letters their
	// ranges count, every row with its commit id, whose files are all
	// there: some rows were in a file the storage lost, which floe
	// maintain dropped (a compaction's file may hold some of several
	// commits' dead letters). Reconciling deletes their rows and adds their
	// files again, in one commit.
	Short []mapping.Commit
	// GivenUp are commits whose dead letters floe maintain
	// --drop-missing-dead-letter-files recorded as lost
	// (PropDeadLettersLostPrefix) and that are still as recorded: their
	// files are gone and the table holds the rows it held of them then,
	// fewer than they count. Reconciling leaves them alone (they are
	// neither Missing nor a count mismatch); the audit reports them.
	GivenUp []mapping.Commit
	// filesGone are the commits without rows, or with fewer or more rows
	// than they count, some of whose files are gone: nothing can add
	// their dead letters (Missing, or a count mismatch).
	filesGone map[string]bool
	// staleFiles are the files all of whose rows are stale (reconciling
	// drops them whole), and mixed is set when other files hold stale
	// rows too (reconciling rewrites those).
	staleFiles []string
	mixed      bool
	// legacyOf attributes a row without a commit id (LegacyOwner).
	legacyOf func(tp mapping.TopicPartition, offset int64) string
}

// LegacyOwner returns the id of the commit of Commits that a row without
// a commit id (an older floe's) at offset of tp is attributed to, as
// reconciling attributes it, or "" when none is (the row is
// StaleLegacy): a reader counting one ref's dead letters skips a legacy
// row of another ref's commit, as it skips a row with another commit's
// id.
func (s *DeadLetterState) LegacyOwner(tp mapping.TopicPartition, offset int64) string {
	if s == nil || s.legacyOf == nil {
		return ""
	}
	return s.legacyOf(tp, offset)
}

// Converged reports whether reconciling has nothing to add or remove.
func (s *DeadLetterState) Converged() bool {
	return len(s.Pending) == 0 && len(s.Stale) == 0 && len(s.StaleLegacy) == 0 && len(s.Doubled) == 0 && len(s.Short) == 0
}

// Repairs reports whether reconciling replaces the rows of commit id by
// its files (Doubled, Short): its count mismatch is repaired.
func (s *DeadLetterState) Repairs(id string) bool {
	has := func(c mapping.Commit) bool { return c.ID == id }
	return slices.ContainsFunc(s.Doubled, has) || slices.ContainsFunc(s.Short, has)
}

// DeadLetterState reads the state of the dead-letter table dlq of data
// table t (see DeadLetterState), as each was last loaded.
func (t *Table) DeadLetterState(ctx context.Context, dlq *Table) (*DeadLetterState, error) {
	return t.deadLetterState(ctx, dlq, map[string]*deadLetterFile{})
}

// deadLetterFile is what one data file of a dead-letter table holds: rows
// by commit id, and the positions of its rows without one.
type deadLetterFile struct {
	ids    map[string]int64
	legacy []position
}

// position is a record's place in the log.
type position struct {
	tp     mapping.TopicPartition
	offset int64
}

// deadLetterState is DeadLetterState reading only the files that files
// (by path; data files never change) does not know yet, and adding them
// to it.
func (t *Table) deadLetterState(ctx context.Context, dlq *Table, files map[string]*deadLetterFile) (*DeadLetterState, error) {
	st := &DeadLetterState{Table: dlq.Name(), Commits: map[string]mapping.Commit{}, Rows: map[string]int64{}, StaleLegacy: map[mapping.TopicPartition][]int64{}}
	commits, err := t.deadLetterCommits(ctx, dlq.Name())
	if err != nil {
		return nil, fmt.Errorf("read the ledgers of %s to reconcile %s with them: %w", t.Name(), dlq.Name(), err)
	}
	// Ranges with dead letters of each partition, to attribute rows
	// without a commit id (legacy rows) by position: branches' commits
	// before tags' (deadLetterCommits lists them so).
	ranges := map[mapping.TopicPartition][]string{}
	for _, c := range commits {
		st.Commits[c.ID] = c
		for _, r := range c.Ranges {
			ranges[r.TopicPartition] = append(ranges[r.TopicPartition], c.ID)
		}
	}
	if head := dlq.Head(); head != nil {
		st.SnapshotID = head.SnapshotID
	}
	live, lost, err := dlq.readDeadLetterFiles(ctx, st.SnapshotID, files)
	if err != nil {
		return nil, err
	}
	st.Lost = lost
	// withIDs are the commits with rows that carry their id: written
	// since the column existed.
	withIDs := map[string]bool{}
	for _, path := range live {
		if f := files[path]; f != nil {
			for id := range f.ids {
				if _, ok := st.Commits[id]; ok {
					withIDs[id] = true
				}
			}
		}
	}
	// A legacy row is its position's: the first commit whose range with
	// dead letters holds it, among the commits without rows that carry an
	// id first (an older floe wrote it, so it is a commit of that era:
	// after a rollback under a tag and the same offsets sunk again, the
	// tag's legacy row is the tag's commit's, not the new one's, which has
	// its own row), branches' before tags' (deadLetterCommits), in ref
	// name order. A function of the position alone, so that every legacy
	// row at a position is one commit's (Doubled).
	st.legacyOf = func(tp mapping.TopicPartition, offset int64) string {
		owner := ""
		for _, id := range ranges[tp] {
			if !slices.ContainsFunc(st.Commits[id].Ranges, func(r mapping.Range) bool {
				return r.TopicPartition == tp && r.DeadLetters > 0 && r.Contains(offset)
			}) {
				continue
			}
			if !withIDs[id] {
				return id
			}
			if owner == "" {
				owner = id
			}
		}
		return owner
	}
	stale := map[string]bool{}
	legacyAt := map[string][]position{}
	for _, path := range live {
		f := files[path]
		if f == nil {
			continue // lost
		}
		var liveRows, staleRows int64
		for id, n := range f.ids {
			if _, ok := st.Commits[id]; ok {
				st.Rows[id] += n
				liveRows += n
				continue
			}
			stale[id] = true
			st.StaleRows += n
			staleRows += n
		}
		for _, pos := range f.legacy {
			if id := st.legacyOf(pos.tp, pos.offset); id != "" {
				st.Rows[id]++
				legacyAt[id] = append(legacyAt[id], pos)
				liveRows++
				continue
			}
			st.StaleLegacy[pos.tp] = append(st.StaleLegacy[pos.tp], pos.offset)
			staleRows++
		}
		switch {
		case staleRows > 0 && liveRows == 0:
			st.staleFiles = append(st.staleFiles, path)
		case staleRows > 0:
			st.mixed = true
		}
	}
	st.Stale = slices.Sorted(maps.Keys(stale))
	givenUp := givenUpCommits(dlq.tbl.Properties())
	var fsys iceio.IO
	for _, c := range slices.SortedFunc(maps.Values(st.Commits), func(a, b mapping.Commit) int { return cmp.Compare(a.SnapshotID, b.SnapshotID) }) {
		doubled := !withIDs[c.ID] && st.Rows[c.ID] > deadLetterCount(c)
		short := withIDs[c.ID] && len(legacyAt[c.ID]) == 0 && st.Rows[c.ID] > 0 && st.Rows[c.ID] < deadLetterCount(c)
		if st.Rows[c.ID] > 0 && !doubled && !short {
			continue
		}
		if fsys == nil {
			if fsys, err = dlq.tbl.FS(ctx); err != nil {
				return nil, fmt.Errorf("open the storage of %s: %w", dlq.Name(), err)
			}
		}
		missing, err := missingFiles(fsys, c.DeadLetterFiles)
		if err != nil {
			return nil, fmt.Errorf("look for the dead-letter files of commit %s in %s: %w", c.ID, dlq.Name(), err)
		}
		if len(missing) > 0 {
			if st.filesGone == nil {
				st.filesGone = map[string]bool{}
			}
			st.filesGone[c.ID] = true
		}
		if rows, ok := givenUp[c.ID]; ok && len(missing) > 0 && rows == st.Rows[c.ID] && rows < deadLetterCount(c) {
			st.GivenUp = append(st.GivenUp, c)
			continue
		}
		switch {
		case (doubled || short) && len(missing) > 0:
			// Nothing to replace its rows with: a count mismatch.
		case short:
			st.Short = append(st.Short, c)
		case doubled:
			st.Doubled = append(st.Doubled, c)
			if st.doubledAt == nil {
				st.doubledAt = map[mapping.TopicPartition][]int64{}
			}
			for _, pos := range legacyAt[c.ID] {
				st.doubledAt[pos.tp] = append(st.doubledAt[pos.tp], pos.offset)
			}
		case len(missing) > 0:
			st.Missing = append(st.Missing, c)
		default:
			st.Pending = append(st.Pending, c)
		}
	}
	return st, nil
}

// readDeadLetterFiles reads the commit ids and positions of the rows of
// the dead-letter table t's files at snapshotID that files does not know,
// into files, and returns the paths of every file there, and of those the
// storage no longer has (which files does not get).
func (t *Table) readDeadLetterFiles(ctx context.Context, snapshotID int64, files map[string]*deadLetterFile) (live, lost []string, err error) {
	cols := []string{mapping.ColTopic, mapping.ColPartition, mapping.ColOffset}
	_, hasIDs := t.tbl.Schema().FindFieldByName(mapping.ColCommitID)
	if hasIDs {
		cols = append(cols, mapping.ColCommitID)
	}
	skip := func(path string) bool {
		live = append(live, path)
		return files[path] != nil
	}
	err = t.ScanFiles(ctx, snapshotID, ScanOptions{Columns: cols, Skip: skip, MissingOK: true}, func(fb FileBatch) error {
		if fb.Missing {
			lost = append(lost, fb.Path)
			return nil
		}
		f := files[fb.Path]
		if f == nil {
			f = &deadLetterFile{ids: map[string]int64{}}
			files[fb.Path] = f
		}
		if fb.Done {
			return nil
		}
		b := fb.Batch
		var ids *array.String
		var err1 error
		if hasIDs {
			ids, err1 = columnAs[*array.String](b, mapping.ColCommitID)
		}
		topic, err2 := columnAs[*array.String](b, mapping.ColTopic)
		part, err3 := columnAs[*array.Int32](b, mapping.ColPartition)
		off, err4 := columnAs[*array.Int64](b, mapping.ColOffset)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return fmt.Errorf("dead-letter file %s: %w", fb.Path, err)
		}
		for i := range int(b.NumRows()) {
			if ids != nil && ids.IsValid(i) {
				f.ids[ids.Value(i)]++
				continue
			}
			// Written before the column existed: attributed by position
			// (deadLetterState).
			f.legacy = append(f.legacy, position{tp: mapping.TopicPartition{Topic: topic.Value(i), Partition: part.Value(i)}, offset: off.Value(i)})
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the commit ids of the rows of %s: %w", t.Name(), err)
	}
	slices.Sort(lost)
	return live, lost, nil
}

// CountMismatches returns the commits whose rows differ in number from
// the dead letters their ranges count (commits without rows are Pending
// or Missing instead), Doubled ones included, GivenUp ones not.
func (s *DeadLetterState) CountMismatches() []mapping.Commit {
	var out []mapping.Commit
	for _, id := range slices.Sorted(maps.Keys(s.Rows)) {
		c := s.Commits[id]
		if n := s.Rows[id]; n != deadLetterCount(c) && !slices.ContainsFunc(s.GivenUp, func(g mapping.Commit) bool { return g.ID == id }) {
			out = append(out, c)
		}
	}
	return out
}

// deadLetterCount is the number of dead letters c's ranges count.
func deadLetterCount(c mapping.Commit) int64 {
	var n int64
	for _, r := range c.Ranges {
		n += r.DeadLetters
	}
	return n
}

// MissingFiles returns those of paths, files of t, that t's storage no
// longer has (deleted outside floe): one request per file.
func (t *Table) MissingFiles(ctx context.Context, paths []string) ([]string, error) {
	fsys, err := t.tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("open the storage of %s: %w", t.Name(), err)
	}
	missing, err := missingFiles(fsys, paths)
	if err != nil {
		return nil, fmt.Errorf("look for the files of %s in its storage: %w", t.Name(), err)
	}
	return missing, nil
}

// missingFiles returns the paths of files that do not exist.
func missingFiles(fsys iceio.IO, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		f, err := fsys.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			out = append(out, p)
			continue
		}
		if err != nil {
			return nil, err
		}
		f.Close()
	}
	return out, nil
}

// deadLetterCommits returns the commits of the ledgers (archives
// included) of every branch and tag of t as last loaded that name the
// dead-letter table dlq for their dead-letter files, each once (the
// branches' first, then the tags', each in ref name order), with only
// their ranges that count dead letters: what dlq must hold, and the files
// dlq's maintenance must keep. A tag's count (the history floe replay
// --tag-main keeps, a rolled-back head an operator pinned): its audit and
// its dead-letter listing read them there. It reads only the archive blocks
// holding such a commit (the index keeps each entry's dead-letter
// properties), so that its memory and time are set by the commits with
// dead letters, not by the length of the ledger.
func (t *Table) deadLetterCommits(ctx context.Context, dlq string) ([]mapping.Commit, error) {
	meta := t.tbl.Metadata()
	// Branches first, then tags, each in name order: rows without a
	// commit id go to the first commit that holds their position
	// (deadLetterState).
	var branches, tags []string
	for name, ref := range meta.Refs() {
		if ref.SnapshotRefType == table.BranchRef {
			branches = append(branches, name)
		} else {
			tags = append(tags, name)
		}
	}
	slices.Sort(branches)
	slices.Sort(tags)
	seen := map[string]bool{}
	var out []mapping.Commit
	for _, name := range slices.Concat(branches, tags) {
		commits, err := t.DeadLetterCommits(ctx, meta.SnapshotByName(name).SnapshotID, dlq)
		if err != nil {
			return nil, fmt.Errorf("ref %s: %w", name, err)
		}
		for _, c := range commits {
			if !seen[c.ID] {
				seen[c.ID] = true
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// DeadLetterCommits returns the commits of the ledger as of a snapshot of
// t (0: the branch head), archives included, that name the dead-letter
// table dlq for their dead-letter files, with only their ranges that
// count dead letters. It reads only the archive blocks holding such a
// commit, as deadLetterCommits does for every branch.
func (t *Table) DeadLetterCommits(ctx context.Context, snapshotID int64, dlq string) ([]mapping.Commit, error) {
	var out []mapping.Commit
	for c, err := range t.commitsWhere(ctx, snapshotID, commitFilter{deadLetters: dlq}) {
		if err != nil {
			return nil, err
		}
		if c.DeadLetterTable != dlq || len(c.DeadLetterFiles) == 0 {
			continue
		}
		var dead []mapping.Range
		for _, r := range c.Ranges {
			if r.DeadLetters > 0 {
				dead = append(dead, r)
			}
		}
		c.Ranges = dead
		out = append(out, c)
	}
	return out, nil
}

// DeadLettersMissingError reports commits whose dead letters are in no
// row of their dead-letter table and whose files are gone: the ledger
// counts dead letters that nothing can restore.
type DeadLettersMissingError struct {
	Table, DeadLetters string
	Commits            []mapping.Commit
}

func (e *DeadLettersMissingError) Error() string {
	c := e.Commits[0]
	commits := "a commit"
	if len(e.Commits) > 1 {
		commits = fmt.Sprintf("%d commits", len(e.Commits))
	}
	return fmt.Sprintf("the dead letters of %s of %s are not in %s and their files are gone (commit %s, snapshot %d, lists %s): they were deleted outside floe (or by an earlier floe's maintenance of a rolled-back line); restore the files from a backup, replay the table, or accept the loss with floe maintain --table %s --drop-missing-dead-letter-files (the audit keeps reporting it)",
		commits, e.Table, e.DeadLetters, c.ID, c.SnapshotID, strings.Join(c.DeadLetterFiles, ", "), e.Table)
}

// DeadLetterFilesLostError reports data files of a dead-letter table that
// its storage no longer has (deleted outside floe, an aws s3 rm): the dead
// letters in them are lost, no reader can scan the table, and reconciling
// it adds and removes nothing (which commits the files held is unknown:
// adding a commit's files again would double its dead letters once the
// lost file is restored) until they are restored or dropped
// (MaintainOptions.DropMissingDeadLetterFiles).
type DeadLetterFilesLostError struct {
	Table, DeadLetters string
	Files              []string
}

func (e *DeadLetterFilesLostError) Error() string {
	files := "a data file its storage no longer has (" + e.Files[0] + ")"
	if len(e.Files) > 1 {
		files = fmt.Sprintf("%d data files its storage no longer has (first %s)", len(e.Files), e.Files[0])
	}
	return fmt.Sprintf("dead-letter table %s of %s lists %s: the dead letters there are lost and no reader can scan %s; restore the files from a backup, or run floe maintain --table %s --drop-missing-dead-letter-files to remove them from it (floe audit then names the commits whose dead letters they held)",
		e.DeadLetters, e.Table, files, e.DeadLetters, e.Table)
}

// DeadLetterCountError reports a commit whose rows in the dead-letter
// table differ in number from the dead letters its ranges count.
type DeadLetterCountError struct {
	Table, DeadLetters string
	Commit             mapping.Commit
	Rows               int64
}

func (e *DeadLetterCountError) Error() string {
	return fmt.Sprintf("commit %s (snapshot %d) of %s counts %d dead letters, but %s holds %d rows of it: the dead-letter table was changed outside floe",
		e.Commit.ID, e.Commit.SnapshotID, e.Table, deadLetterCount(e.Commit), e.DeadLetters, e.Rows)
}

// ReconcileDeadLetters makes the dead-letter table dlq hold exactly the
// dead letters of the commits that the ledgers of t's branches and tags
// (archives included) name for it, each once, identified by their commit id
// (mapping.ColCommitID):
//
//   - a commit without rows (its writer stopped between the commit and
//     adding them, or an undone rollback brought it back) gets its files
//     added;
//   - rows of a commit in no branch's or tag's ledger (a rollback, a
//     branch published over it) are removed (a copy-on-write delete).
//
// Whatever was expired, compacted or rolled back, it converges to that
// set, and a second run does nothing. Rows without a commit id that an
// older floe doubled are replaced by their commit's files
// (DeadLetterState.Doubled). dlq is read before t's ledgers, and
// the change asserts dlq's head as read, so that a writer's commit and its
// dead letters, made in between, are never taken for a rolled-back one
// nor added twice. A commit whose files are gone is a
// *DeadLettersMissingError, one whose rows are too few or too many a
// *DeadLetterCountError, after the rest is done; a dead-letter table
// whose storage lost data files is a *DeadLetterFilesLostError, and
// nothing is done. Every sink session runs it first, and so does floe
// maintain.
func (t *Table) ReconcileDeadLetters(ctx context.Context, dlq *Table, log *slog.Logger) (Reconciled, error) {
	var res Reconciled
	if log == nil {
		log = slog.Default()
	}
	// Writers append dead letters all the time: an attempt that loses the
	// race reads only the files it has not read yet. A transient failure of
	// the catalog or the storage gets a few more attempts, as a writer's
	// commit does: every sink session starts with this, and a session it
	// failed waited out a growing pause before the next one tried again
	// (behind a catalog whose connections were killed every 50-500 ms, its
	// one attempt a session failed every time). A change whose outcome is
	// unknown is seen, or not, in the table read again.
	const maxAttempts, maxErrors = 30, 5
	files := map[string]*deadLetterFile{}
	var lastErr error
	errs := 0
	// unknown is what a converging commit that failed transiently would
	// have done: when the table read again is converged, it most likely
	// landed with its answer lost, and is reported as done.
	var unknown Reconciled
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(min(attempt, 4))); err != nil {
				return res, fmt.Errorf("reconcile %s: %w (last error: %w)", dlq.Name(), err, lastErr)
			}
		}
		st, err := t.readDeadLetterState(ctx, dlq, files)
		if err == nil && len(st.Lost) > 0 {
			return res, &DeadLetterFilesLostError{Table: t.Name(), DeadLetters: dlq.Name(), Files: st.Lost}
		}
		switch {
		case err == nil && !st.Converged():
			if res, err = dlq.converge(ctx, log, st); err != nil {
				err = fmt.Errorf("reconcile %s with the ledger of %s: %w", dlq.Name(), t.Name(), err)
			}
		case err == nil:
			res = unknown
		}
		if err != nil {
			switch {
			case isConflict(err):
				log.Info("reconciling the dead-letter table lost a race; reloading", "table", dlq.Name(), "attempt", attempt, "err", err)
			case ctx.Err() == nil && floecat.IsTransient(err) && errs < maxErrors:
				errs++
				unknown = res
				log.Info("reconciling the dead-letter table failed; reloading to retry", "table", dlq.Name(), "attempt", attempt, "err", err)
			default:
				return Reconciled{}, err
			}
			res, lastErr = Reconciled{}, err
			continue
		}
		if len(st.Missing) > 0 {
			return res, &DeadLettersMissingError{Table: t.Name(), DeadLetters: dlq.Name(), Commits: st.Missing}
		}
		// Doubled and short commits were repaired by the converge.
		if bad := slices.DeleteFunc(st.CountMismatches(), func(c mapping.Commit) bool { return st.Repairs(c.ID) }); len(bad) > 0 {
			return res, &DeadLetterCountError{Table: t.Name(), DeadLetters: dlq.Name(), Commit: bad[0], Rows: st.Rows[bad[0].ID]}
		}
		return res, nil
	}
	return res, fmt.Errorf("reconcile %s: gave up after %d attempts: %w", dlq.Name(), maxAttempts, lastErr)
}

// readDeadLetterState reloads the dead-letter table dlq and data table t
// and reads dlq's state (deadLetterState, reading only the files that
// files does not know).
func (t *Table) readDeadLetterState(ctx context.Context, dlq *Table, files map[string]*deadLetterFile) (*DeadLetterState, error) {
	if err := dlq.Refresh(ctx); err != nil {
		return nil, err
	}
	if err := dlq.addCommitIDColumn(ctx); err != nil {
		return nil, err
	}
	if err := t.Refresh(ctx); err != nil {
		return nil, err
	}
	return t.deadLetterState(ctx, dlq, files)
}

// converge applies st to the dead-letter table t in one commit on the
// head st was read at: stale rows removed, pending commits' files added.
// Writers append dead letters all the time; when one got in first, and
// every snapshot since st's head is such an append (a floe writer's,
// naming its commit), st still holds but for the commits those appends
// added, and the commit is made again on the new head at once. Otherwise
// it returns the conflict, and the caller reads the table again.
func (t *Table) converge(ctx context.Context, log *slog.Logger, st *DeadLetterState) (Reconciled, error) {
	const maxAttempts = 20
	var err error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(1)); err != nil {
				return Reconciled{}, err
			}
			if err := t.Refresh(ctx); err != nil {
				return Reconciled{}, err
			}
			added, ok := t.appendedSince(st)
			if !ok {
				return Reconciled{}, err
			}
			// Their writers added those in the meantime.
			st.Pending = slices.DeleteFunc(slices.Clone(st.Pending), func(c mapping.Commit) bool { return added[c.ID] })
			st.SnapshotID = t.Head().SnapshotID
			if st.Converged() {
				return Reconciled{}, nil
			}
			log = slog.New(slog.DiscardHandler) // said once
		}
		txn := t.tbl.NewTransaction()
		var res Reconciled
		if res, err = t.stageConverge(ctx, log, st, txn); err != nil {
			return Reconciled{}, err
		}
		var tbl *table.Table
		if tbl, err = txn.Commit(ctx); err == nil {
			return res, t.adoptCommitted(ctx, tbl)
		}
		if !isConflict(err) {
			// What the commit would have done: it may have landed, its
			// answer lost (ReconcileDeadLetters tells by reading again).
			return res, err
		}
	}
	return Reconciled{}, err
}

// appendedSince reports whether every snapshot of the dead-letter table t
// after st's head is a floe writer's append of dead letters
// (KeyDeadLettersFor), and returns the commits they added.
func (t *Table) appendedSince(st *DeadLetterState) (map[string]bool, bool) {
	added := map[string]bool{}
	meta := t.tbl.Metadata()
	for s := t.Head(); s != nil && s.SnapshotID != st.SnapshotID; {
		if s.Summary == nil || s.Summary.Operation != table.OpAppend || s.Summary.Properties[KeyDeadLettersFor] == "" || s.ParentSnapshotID == nil {
			return nil, false
		}
		for id := range strings.SplitSeq(s.Summary.Properties[KeyDeadLettersFor], ",") {
			added[id] = true
		}
		if s = meta.SnapshotByID(*s.ParentSnapshotID); s == nil {
			return nil, false
		}
	}
	return added, true
}

// stageConverge stages st's changes on txn, which asserts the head it was
// begun on.
func (t *Table) stageConverge(ctx context.Context, log *slog.Logger, st *DeadLetterState, txn *table.Transaction) (Reconciled, error) {
	var res Reconciled
	if err := txn.AssertRefSnapshotID(table.MainBranch); err != nil {
		return res, err
	}
	if filter := legacyFilter(st.doubledAt); filter != nil {
		ids := commitIDs(st.Doubled)
		log.Warn("replacing dead letters an older floe doubled (rows without a commit id) by their commits' files",
			"table", t.Name(), "commits", strings.Join(ids, ","))
		if err := t.deleteRewriting(ctx, txn, filter, iceberg.Properties{KeyDeadLettersRemovedFor: strings.Join(ids, ",")}); err != nil {
			return res, fmt.Errorf("delete doubled dead letters: %w", err)
		}
		res.RepairedLegacy = len(ids)
	}
	if filter := staleFilter(st); filter != nil {
		// The outcome of a rollback or a publish, not a fault.
		log.Info("removing the dead letters of commits no branch's or tag's ledger has (the table was rolled back, or a branch published over it)",
			"table", t.Name(), "commits", len(st.Stale), "rows", st.StaleRows, "legacy_partitions", len(st.StaleLegacy))
		props := iceberg.Properties{KeyDeadLettersRemovedFor: strings.Join(st.Stale, ",")}
		// Files of stale rows only (each commit writes files of its own)
		// leave whole, in a commit of metadata only: it must be quick to
		// win its race with the writers. Files that compaction merged
		// with live rows are rewritten without the stale ones.
		if len(st.staleFiles) > 0 {
			if err := txn.ReplaceDataFiles(ctx, st.staleFiles, nil, props); err != nil {
				return res, fmt.Errorf("remove files of stale dead letters: %w", err)
			}
		}
		if st.mixed {
			if err := t.deleteRewriting(ctx, txn, filter, props); err != nil {
				return res, fmt.Errorf("delete stale dead letters: %w", err)
			}
		}
		res.Removed = len(st.Stale)
		for _, offs := range st.StaleLegacy {
			res.RemovedLegacy += len(offs)
		}
	}
	if len(st.Short) > 0 {
		ids := commitIDs(st.Short)
		log.Warn("replacing the dead letters of commits that have too few rows (a file the storage lost was dropped) by their commits' files",
			"table", t.Name(), "commits", strings.Join(ids, ","))
		if err := t.deleteRewriting(ctx, txn, commitIn(ids), iceberg.Properties{KeyDeadLettersRemovedFor: strings.Join(ids, ",")}); err != nil {
			return res, fmt.Errorf("delete the rows of commits with too few dead letters: %w", err)
		}
		res.Refilled = len(ids)
	}
	if len(st.Pending) > 0 || len(st.Doubled) > 0 || len(st.Short) > 0 {
		var ids, files []string
		for _, c := range slices.Concat(st.Pending, st.Doubled, st.Short) {
			ids = append(ids, c.ID)
			files = append(files, c.DeadLetterFiles...)
		}
		log.Info("adding the dead letters of commits whose writer stopped before it added them (or that a rollback's undo brought back)",
			"table", t.Name(), "commits", len(ids), "files", len(files))
		if err := txn.AddFiles(ctx, files, iceberg.Properties{KeyDeadLettersFor: strings.Join(ids, ",")}, false); err != nil {
			return res, fmt.Errorf("add the dead-letter files of %d commits: %w", len(ids), err)
		}
		res.Added = len(st.Pending) + len(st.Doubled)
	}
	return res, nil
}

// deleteRewriting stages on txn the deletion of the rows filter matches
// copy-on-write, whatever the table's write.delete.mode: a reconciliation
// removes a commit's rows to add its files again, and under merge-on-read
// (another engine's default) the delete only wrote position deletes, the
// files stayed live, and adding them again failed at every sink start
// and every floe maintain (found by review). The table's property is set
// back in the same transaction.
func (t *Table) deleteRewriting(ctx context.Context, txn *table.Transaction, filter iceberg.BooleanExpression, props iceberg.Properties) error {
	mode, set := t.tbl.Properties()[table.WriteDeleteModeKey]
	if !set || mode == table.WriteModeCopyOnWrite {
		return txn.Delete(ctx, filter, props)
	}
	if err := txn.SetProperties(iceberg.Properties{table.WriteDeleteModeKey: table.WriteModeCopyOnWrite}); err != nil {
		return err
	}
	if err := txn.Delete(ctx, filter, props); err != nil {
		return err
	}
	return txn.SetProperties(iceberg.Properties{table.WriteDeleteModeKey: mode})
}

// commitIDs returns the ids of cs, in order.
func commitIDs(cs []mapping.Commit) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return ids
}

// commitIn selects the rows of the commits ids, and no row without a
// commit id (an older floe's): a copy-on-write delete keeps only the rows
// for which its filter is false, and IsIn of a null is null, not false.
func commitIn(ids []string) iceberg.BooleanExpression {
	col := iceberg.Reference(mapping.ColCommitID)
	return iceberg.NewAnd(iceberg.NotNull(col), iceberg.IsIn(col, ids...))
}

// staleFilter selects the rows of st's stale commits and stale legacy
// rows; nil when there are none.
func staleFilter(st *DeadLetterState) iceberg.BooleanExpression {
	var terms []iceberg.BooleanExpression
	if len(st.Stale) > 0 {
		terms = append(terms, commitIn(st.Stale))
	}
	if legacy := legacyFilter(st.StaleLegacy); legacy != nil {
		terms = append(terms, legacy)
	}
	if len(terms) == 0 {
		return nil
	}
	return anyOf(terms...)
}

// legacyFilter selects the rows without a commit id at the offsets of
// each partition of at; nil when there are none.
func legacyFilter(at map[mapping.TopicPartition][]int64) iceberg.BooleanExpression {
	var terms []iceberg.BooleanExpression
	for _, tp := range slices.SortedFunc(maps.Keys(at), mapping.TopicPartition.Compare) {
		terms = append(terms, iceberg.NewAnd(
			iceberg.IsNull(iceberg.Reference(mapping.ColCommitID)),
			iceberg.EqualTo(iceberg.Reference(mapping.ColTopic), tp.Topic),
			iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), tp.Partition),
			iceberg.IsIn(iceberg.Reference(mapping.ColOffset), at[tp]...)))
	}
	if len(terms) == 0 {
		return nil
	}
	return anyOf(terms...)
}

// ReconcileDeadLetterTables reconciles the dead-letter tables of t, as
// floe maintain does (reconcileDeadLetterTables), for a writer that
// changed which commits the ledgers hold: a publish, after which the dead
// letters of main's earlier commits belong to no ledger.
func (t *Table) ReconcileDeadLetterTables(ctx context.Context, log *slog.Logger) error {
	var res MaintainResult
	return t.reconcileDeadLetterTables(ctx, log, MaintainOptions{}, &res)
}

// reconcileDeadLetterTables reconciles, for floe maintain, the dead-letter
// tables of t (DeadLetterTables) when t is a data table, or t itself with
// its data table when t is a dead-letter table; with
// opts.DropMissingDeadLetterFiles, it first drops from each the data files
// its storage lost (*DeadLetterFilesLostError), and a dry run
// (opts.DryRun) only lists those. What a table's state leaves for a person
// to decide (IsDeadLetterDamage) is returned after every table is
// reconciled.
func (t *Table) reconcileDeadLetterTables(ctx context.Context, log *slog.Logger, opts MaintainOptions, res *MaintainResult) error {
	dropLost := opts.DropMissingDeadLetterFiles
	reconcile := func(data, dlq *Table) error {
		if opts.DryRun {
			// Only what a drop would remove is reported.
			st, err := data.DeadLetterState(ctx, dlq)
			if err == nil && dropLost {
				res.DroppedDeadLetterFiles = append(res.DroppedDeadLetterFiles, st.Lost...)
				res.DeadLetters.RecordedLost += len(st.lostForGood())
			}
			return err
		}
		r, err := data.ReconcileDeadLetters(ctx, dlq, log)
		// A writer's append between the read and the drop fails the
		// drop's assertion: read again.
		for attempt := 1; dropLost && attempt <= 10; attempt++ {
			lost, ok := errors.AsType[*DeadLetterFilesLostError](err)
			if !ok {
				break
			}
			if err = dlq.dropLostFiles(ctx, log, lost.Files); err == nil {
				res.DroppedDeadLetterFiles = append(res.DroppedDeadLetterFiles, lost.Files...)
			} else if !isConflict(err) {
				return err
			}
			r, err = data.ReconcileDeadLetters(ctx, dlq, log)
		}
		if dropLost && IsDeadLetterDamage(err) {
			var n int
			if n, err = data.giveUpLostDeadLetters(ctx, log, dlq); err == nil {
				res.DeadLetters.RecordedLost += n
				r2, err2 := data.ReconcileDeadLetters(ctx, dlq, log)
				r, err = r.plus(r2), err2
			}
		}
		res.DeadLetters = res.DeadLetters.plus(r)
		return err
	}
	if of := t.tbl.Properties()[PropDeadLettersOf]; of != "" {
		data, err := Open(ctx, t.cat, identOf(of), OpenOptions{})
		if errors.Is(err, ErrTableNotFound) {
			return nil // a data table dropped: nothing to reconcile with
		}
		if err != nil {
			return fmt.Errorf("open %s, whose dead letters %s holds: %w", of, t.Name(), err)
		}
		return reconcile(data, t)
	}
	dlqs, err := t.DeadLetterTables(ctx)
	if err != nil {
		return err
	}
	var deferred error
	for _, dlq := range dlqs {
		err := reconcile(t, dlq)
		if IsDeadLetterDamage(err) {
			deferred = errors.Join(deferred, err)
			continue
		}
		if err != nil {
			return err
		}
	}
	return deferred
}

// giveUpLostDeadLetters records on the dead-letter table dlq of t the
// commits whose dead letters are lost for good (lostForGood), with the
// rows it holds of each (PropDeadLettersLostPrefix), so that reconciling
// leaves them alone, and returns how many it recorded. A person asked for
// it (MaintainOptions.DropMissingDeadLetterFiles): their files are gone,
// so only a replay can bring those dead letters back, and until one does
// the audit reports them.
func (t *Table) giveUpLostDeadLetters(ctx context.Context, log *slog.Logger, dlq *Table) (int, error) {
	st, err := t.DeadLetterState(ctx, dlq)
	if err != nil {
		return 0, err
	}
	lost := st.lostForGood()
	if len(lost) == 0 {
		return 0, nil
	}
	props := map[string]string{}
	var n int64
	for _, c := range lost {
		props[PropDeadLettersLostPrefix+c.ID] = strconv.FormatInt(st.Rows[c.ID], 10)
		n += deadLetterCount(c) - st.Rows[c.ID]
	}
	log.Warn("recording dead letters whose files are gone as lost: floe audit reports them until a replay of the table brings them back",
		"table", t.Name(), "dead_letter_table", dlq.Name(), "commits", len(lost), "dead_letters", n, "first_commit", lost[0].ID)
	if err := dlq.SetProperties(ctx, props); err != nil {
		return 0, fmt.Errorf("record the lost dead letters of %d commits of %s on %s: %w", len(lost), t.Name(), dlq.Name(), err)
	}
	return len(lost), nil
}

// lostForGood returns the commits whose dead letters nothing can restore
// and that are not yet recorded as lost: without rows and with files gone
// (Missing), or with fewer rows than they count and files gone.
func (s *DeadLetterState) lostForGood() []mapping.Commit {
	lost := slices.Clone(s.Missing)
	for _, c := range s.CountMismatches() {
		if s.filesGone[c.ID] && s.Rows[c.ID] < deadLetterCount(c) {
			lost = append(lost, c)
		}
	}
	return lost
}

// givenUpCommits returns the commits a dead-letter table's properties
// record as lost (PropDeadLettersLostPrefix), with the rows it held of
// each then; a value that is not a count (set by hand) records nothing.
func givenUpCommits(props iceberg.Properties) map[string]int64 {
	out := map[string]int64{}
	for key, val := range props {
		id, ok := strings.CutPrefix(key, PropDeadLettersLostPrefix)
		if !ok || id == "" {
			continue
		}
		if n, err := strconv.ParseInt(val, 10, 64); err == nil && n >= 0 {
			out[id] = n
		}
	}
	return out
}

// IsDeadLetterDamage reports whether err is damage to a dead-letter table
// that reconciling cannot repair and a person must decide on: a count
// mismatch (*DeadLetterCountError), dead letters whose files are gone
// (*DeadLettersMissingError), files the storage lost
// (*DeadLetterFilesLostError). It stops neither a sink (its data table is
// not at fault) nor the rest of a maintenance: they say it, and floe
// audit reports it.
func IsDeadLetterDamage(err error) bool {
	_, count := errors.AsType[*DeadLetterCountError](err)
	_, missing := errors.AsType[*DeadLettersMissingError](err)
	_, lost := errors.AsType[*DeadLetterFilesLostError](err)
	return count || missing || lost
}

// dropLostFiles removes paths, data files of the dead-letter table t that
// its storage no longer has, from t, in one snapshot of metadata only
// (KeyDeadLetterFilesDropped), on the head the caller read them at.
func (t *Table) dropLostFiles(ctx context.Context, log *slog.Logger, paths []string) error {
	log.Warn("dropping data files the storage of the dead-letter table lost: the dead letters in them are lost for good",
		"table", t.Name(), "files", len(paths), "first", paths[0])
	txn := t.tbl.NewTransaction()
	err := txn.AssertRefSnapshotID(table.MainBranch)
	if err == nil {
		err = txn.ReplaceDataFiles(ctx, paths, nil, iceberg.Properties{KeyDeadLetterFilesDropped: strings.Join(paths, ",")})
	}
	var tbl *table.Table
	if err == nil {
		tbl, err = txn.Commit(ctx)
	}
	if err != nil {
		return fmt.Errorf("drop %d lost data files from %s: %w", len(paths), t.Name(), err)
	}
	return t.adoptCommitted(ctx, tbl)
}

// DeadLetterTables opens the dead-letter tables of data table t that
// exist: its default one (DeadLetterName) when it holds t's dead letters,
// those its branches' ledgers name, and those it recorded
// (PropDeadLetterTablePrefix), so that a table a rollback took every commit of
// is still found. Sorted by name.
func (t *Table) DeadLetterTables(ctx context.Context) ([]*Table, error) {
	named, err := t.namedDeadLetterTables()
	if err != nil {
		return nil, fmt.Errorf("read the ledgers of %s for its dead-letter tables: %w", t.Name(), err)
	}
	names := maps.Clone(named)
	for key := range t.tbl.Properties() {
		if n, ok := strings.CutPrefix(key, PropDeadLetterTablePrefix); ok && n != "" {
			names[n] = true
		}
	}
	def := strings.Join(DeadLetterName(t.ident), ".")
	names[def] = true
	var out []*Table
	for _, name := range slices.Sorted(maps.Keys(names)) {
		dlq, err := OpenDeadLetters(ctx, t.cat, identOf(name), t.Name(), false)
		if errors.Is(err, ErrTableNotFound) {
			continue // never created, or dropped: the audit says so when a commit names it
		}
		if err != nil && name == def && !named[def] {
			continue // a table of that name that is not t's dead-letter table, and no commit names it
		}
		if err != nil {
			return nil, fmt.Errorf("open dead-letter table %s of %s: %w", name, t.Name(), err)
		}
		out = append(out, dlq)
	}
	return out, nil
}

// DeadLetterTableNames returns the names of the dead-letter tables data
// table t names, whether the catalog has them or not: those its branches'
// ledgers name and those it recorded (PropDeadLetterTablePrefix). Sorted.
// A table registered in a new catalog needs them registered too.
func (t *Table) DeadLetterTableNames() ([]string, error) {
	names, err := t.namedDeadLetterTables()
	if err != nil {
		return nil, fmt.Errorf("read the ledgers of %s for its dead-letter tables: %w", t.Name(), err)
	}
	for key := range t.tbl.Properties() {
		if n, ok := strings.CutPrefix(key, PropDeadLetterTablePrefix); ok && n != "" {
			names[n] = true
		}
	}
	return slices.Sorted(maps.Keys(names)), nil
}

// RecordedDeadLetterTable is the dead-letter table that data table t
// records for a writer that names none (PropDeadLetterTable), or nil.
func (t *Table) RecordedDeadLetterTable() table.Identifier {
	name := t.tbl.Properties()[PropDeadLetterTable]
	if name == "" {
		return nil
	}
	ident, err := floecat.ParseIdent(name)
	if err != nil {
		return nil // set by hand, and wrong: the default table
	}
	return ident
}

// RecordDeadLetterTable records on data table t the dead-letter table
// named, which a writer named (--dlq-table), when t records another one
// or none: a later writer that names none writes there too
// (RecordedDeadLetterTable), so that its dead letters are not split over
// the default table. Only main's writers record it: the property is the
// table's, and a writer of a branch (a replay) would change where main's
// sink writes.
func (t *Table) RecordDeadLetterTable(ctx context.Context, named table.Identifier) error {
	name := strings.Join(named, ".")
	if len(named) == 0 || t.branch != table.MainBranch || t.tbl.Properties()[PropDeadLetterTable] == name {
		return nil
	}
	if err := t.SetProperties(ctx, map[string]string{PropDeadLetterTable: name}); err != nil {
		return fmt.Errorf("record dead-letter table %s on %s: %w", name, t.Name(), err)
	}
	return nil
}

// recordDeadLetterTable sets t's property PropDeadLetterTablePrefix+name
// when it is not there. Setting it again is harmless, so a failure whose
// outcome is unknown is retried like a lost race.
func (t *Table) recordDeadLetterTable(ctx context.Context, name string) error {
	const maxAttempts = 10
	var lastErr error
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if attempt > 1 {
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return fmt.Errorf("record dead-letter table %s on %s: %w (last error: %w)", name, t.Name(), err, lastErr)
			}
			if err := t.Refresh(ctx); err != nil {
				lastErr = err
				continue
			}
		}
		key := PropDeadLetterTablePrefix + name
		if _, ok := t.tbl.Properties()[key]; ok {
			return nil
		}
		if lastErr = t.SetProperties(ctx, map[string]string{key: "true"}); lastErr == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("record dead-letter table %s on %s: %w", name, t.Name(), lastErr)
}

// identOf is the identifier of a table named by Name: its parts, which
// hold no dot, joined with dots.
func identOf(name string) table.Identifier { return strings.Split(name, ".") }
