package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
)

// Dead-letter table properties.
const (
	// PropDeadLettersOf marks a dead-letter table with the data table
	// (namespace.name) whose dead letters it holds.
	PropDeadLettersOf = "floe.dead-letters-of"
	// KeyDeadLettersFor, in the summary of a dead-letter table's snapshot,
	// is the id of the data table's commit whose dead letters it adds
	// (mapping.KeyDeadLetterFiles lists their files).
	KeyDeadLettersFor = "floe.dead-letters-for"
	// KeyDeadLettersRemovedFor marks a dead-letter table's snapshot that
	// removed the dead letters of a commit the data table's ledger no
	// longer has.
	KeyDeadLettersRemovedFor = "floe.dead-letters-removed-for"
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
// table of that name that is not a dead-letter table is refused.
//
// A dead-letter table holds records of the data table's topic that could
// not become rows, with the reason. Floe only appends to it, each append
// carrying the id of the data table's commit whose ledger accounts for
// its rows (KeyDeadLettersFor).
func OpenDeadLetters(ctx context.Context, cat catalog.Catalog, ident table.Identifier, of string, create bool) (*Table, error) {
	t, err := Open(ctx, cat, ident, OpenOptions{
		Create:     create,
		Layout:     mapping.DeadLetterLayout,
		Schema:     mapping.DeadLetterSchema(),
		Properties: map[string]string{PropDeadLettersOf: of},
	})
	if err != nil {
		var layout *mapping.LayoutError
		if errors.As(err, &layout) {
			return nil, fmt.Errorf("table %s exists and is not a dead-letter table; name another one (--dlq-table): %w", layout.Table, err)
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
	return t, nil
}

// DeadLettersPendingError reports a commit of the data table that is in,
// whose dead letters could not be added to the dead-letter table yet. The
// commit stands: RollForwardDeadLetters, which every sink session runs
// first, adds them.
type DeadLettersPendingError struct {
	Table, DeadLetters, Commit string
	Err                        error
}

func (e *DeadLettersPendingError) Error() string {
	return fmt.Sprintf("commit %s to %s is in, but its dead letters are not in %s yet (the next floe sink session, or floe maintain, adds them): %v",
		e.Commit, e.Table, e.DeadLetters, e.Err)
}

func (e *DeadLettersPendingError) Unwrap() error { return e.Err }

// snapshotFor reports whether a snapshot of the dead-letter table t has
// key=id in its summary.
func (t *Table) snapshotFor(key, id string) bool {
	for _, s := range t.tbl.Metadata().Snapshots() {
		if s.Summary != nil && s.Summary.Properties[key] == id {
			return true
		}
	}
	return false
}

// addDeadLetters appends files to the dead-letter table t in one snapshot
// for the data table's commit id, unless a snapshot for it is there
// already (an earlier attempt whose outcome was unknown, or another
// process rolling forward).
func (t *Table) addDeadLetters(ctx context.Context, log *slog.Logger, id string, files []iceberg.DataFile) error {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.FilePath()
	}
	b, err := json.Marshal(paths)
	if err != nil {
		return err
	}
	return t.appendForCommit(ctx, log, id, KeyDeadLettersFor, func(txn *table.Transaction, props iceberg.Properties) error {
		props[mapping.KeyDeadLetterFiles] = string(b)
		return txn.AddDataFiles(ctx, files, props, table.WithoutDuplicateCheck())
	})
}

// appendForCommit commits change to the dead-letter table t for the data
// table's commit id, once: it retries lost races after reloading, and
// stops when a snapshot whose summary has key=id is in (key is
// KeyDeadLettersFor for adding a commit's dead letters,
// KeyDeadLettersRemovedFor for removing them).
func (t *Table) appendForCommit(ctx context.Context, log *slog.Logger, id, key string, change func(*table.Transaction, iceberg.Properties) error) error {
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
		}
		if t.snapshotFor(key, id) {
			return nil
		}
		txn := t.tbl.NewTransaction()
		err := txn.AssertRefSnapshotID(table.MainBranch)
		if err == nil {
			err = change(txn, iceberg.Properties{key: id})
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

// Reconciled is what ReconcileDeadLetters did.
type Reconciled struct {
	// Added counts the commits whose pending dead letters it added.
	Added int `json:"added"`
	// Removed counts the commits no longer in the ledger (the table was
	// rolled back, or a branch published over it) whose dead letters it
	// removed from the dead-letter table.
	Removed int `json:"removed"`
}

// ReconcileDeadLetters makes the dead-letter table dlq hold exactly the
// dead letters of t's ledger (its commits that name dlq):
//
//   - a commit whose dead letters are not in dlq yet (its writer stopped
//     between the commit and adding them) gets them added, once;
//   - dead letters that dlq's snapshots added for a commit the ledger no
//     longer has (the table was rolled back past it, or a replay branch
//     published over it) are removed, so that sinking those offsets again
//     does not make them dead letters twice.
//
// A commit counts as added when a snapshot of dlq says so
// (KeyDeadLettersFor) or, where those were expired, when its files are
// live. dlq is read before t's ledger, so that a writer's commit and its
// dead letters, made in between, are never taken for a rolled-back one.
// Every sink session runs it first, and so does floe maintain.
func (t *Table) ReconcileDeadLetters(ctx context.Context, dlq *Table, log *slog.Logger) (Reconciled, error) {
	var res Reconciled
	if log == nil {
		log = slog.Default()
	}
	if err := dlq.Refresh(ctx); err != nil {
		return res, err
	}
	if err := t.Refresh(ctx); err != nil {
		return res, err
	}
	l, err := t.Ledger()
	if err != nil {
		return res, fmt.Errorf("read ledger of %s to reconcile its dead letters: %w", t.Name(), err)
	}
	inLedger := make(map[string]bool, len(l.Commits))
	var mine []mapping.Commit
	for _, c := range l.Commits {
		inLedger[c.ID] = true
		if len(c.DeadLetterFiles) > 0 && c.DeadLetterTable == dlq.Name() {
			mine = append(mine, c)
		}
	}
	added := map[string][]string{} // files each dlq snapshot added, by commit id
	for _, s := range dlq.tbl.Metadata().Snapshots() {
		if s.Summary == nil || s.Summary.Properties[KeyDeadLettersFor] == "" {
			continue
		}
		var files []string
		_ = json.Unmarshal([]byte(s.Summary.Properties[mapping.KeyDeadLetterFiles]), &files)
		id := s.Summary.Properties[KeyDeadLettersFor]
		added[id] = append(added[id], files...)
	}
	var pending []mapping.Commit
	for _, c := range mine {
		if _, ok := added[c.ID]; !ok {
			pending = append(pending, c)
		}
	}
	var stale []string
	for _, id := range slices.Sorted(maps.Keys(added)) {
		if !inLedger[id] {
			stale = append(stale, id)
		}
	}
	if len(pending) == 0 && len(stale) == 0 {
		return res, nil
	}
	files, err := dlq.Files(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("list the files of %s: %w", dlq.Name(), err)
	}
	live := map[string]DataFile{}
	for _, f := range files {
		live[f.Path] = f
	}
	for _, id := range stale {
		var gone []string
		for _, p := range added[id] {
			if _, ok := live[p]; ok {
				gone = append(gone, p)
			}
		}
		if len(gone) == 0 {
			continue
		}
		log.Warn("removing the dead letters of a commit the table's ledger no longer has (the table was rolled back, or a branch published over it)",
			"table", dlq.Name(), "commit", id, "files", len(gone))
		err := dlq.appendForCommit(ctx, log, id, KeyDeadLettersRemovedFor, func(txn *table.Transaction, props iceberg.Properties) error {
			return txn.ReplaceDataFiles(ctx, gone, nil, props)
		})
		if err != nil {
			return res, err
		}
		for _, p := range gone {
			delete(live, p)
		}
		res.Removed++
	}
	for _, c := range pending {
		var missing []string
		for _, p := range c.DeadLetterFiles {
			if _, ok := live[p]; !ok {
				missing = append(missing, p)
			}
		}
		if len(missing) == 0 {
			continue
		}
		if coveredByLive(c, live) {
			// Files of the dead-letter table were rewritten (compacted)
			// after this commit's were added, and the snapshot that added
			// them was expired: they are in, under other names.
			log.Info("the dead letters of a commit are in the dead-letter table under other file names (rewritten)", "table", dlq.Name(), "commit", c.ID)
			continue
		}
		log.Info("adding the dead letters of a commit whose writer stopped before it added them", "table", dlq.Name(), "commit", c.ID, "files", len(missing))
		err := dlq.appendForCommit(ctx, log, c.ID, KeyDeadLettersFor, func(txn *table.Transaction, props iceberg.Properties) error {
			b, err := json.Marshal(missing)
			if err != nil {
				return err
			}
			props[mapping.KeyDeadLetterFiles] = string(b)
			return txn.AddFiles(ctx, missing, props, false)
		})
		if err != nil {
			return res, fmt.Errorf("the dead letters of commit %s (snapshot %d) of %s are not in %s and cannot be added (were their files deleted?): %w",
				c.ID, c.SnapshotID, t.Name(), dlq.Name(), err)
		}
		res.Added++
	}
	return res, nil
}

// coveredByLive reports whether a live dead-letter file lies in one of c's
// ranges with dead letters: c's dead letters were added, since each
// commit's are added whole, in one snapshot.
func coveredByLive(c mapping.Commit, live map[string]DataFile) bool {
	for _, f := range live {
		if !f.HasBounds {
			continue
		}
		for _, r := range c.Ranges {
			if r.DeadLetters > 0 && r.Partition == f.PartitionMin && f.Offsets.Low < r.High && r.Low < f.Offsets.High {
				return true
			}
		}
	}
	return false
}

// reconcileDeadLetterTables reconciles, for floe maintain, the dead-letter
// tables of t: those its ledger names when t is a data table, or t itself
// with its data table when t is a dead-letter table.
func (t *Table) reconcileDeadLetterTables(ctx context.Context, log *slog.Logger, res *MaintainResult) error {
	reconcile := func(data, dlq *Table) error {
		r, err := data.ReconcileDeadLetters(ctx, dlq, log)
		res.DeadLetters.Added += r.Added
		res.DeadLetters.Removed += r.Removed
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
	l, err := t.Ledger()
	if err != nil {
		return err
	}
	for _, name := range deadLetterTables(l) {
		dlq, err := OpenDeadLetters(ctx, t.cat, identOf(name), t.Name(), false)
		if err != nil {
			return fmt.Errorf("open dead-letter table %s, which the ledger of %s names: %w", name, t.Name(), err)
		}
		if err := reconcile(t, dlq); err != nil {
			return err
		}
	}
	return nil
}

// deadLetterTables names the dead-letter tables the ledger's commits name,
// sorted.
func deadLetterTables(l mapping.Ledger) []string {
	names := map[string]bool{}
	for _, c := range l.Commits {
		if c.DeadLetterTable != "" {
			names[c.DeadLetterTable] = true
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// identOf is the identifier of a table named by Name: its parts, which
// hold no dot, joined with dots.
func identOf(name string) table.Identifier { return strings.Split(name, ".") }
