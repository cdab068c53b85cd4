package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

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
	// is the id of the data table's commit whose dead letters it adds.
	KeyDeadLettersFor = "floe.dead-letters-for"
)

// DeadLetterName is the default dead-letter table of a data table:
// NAMESPACE.TABLE_dlq.
func DeadLetterName(data table.Identifier) table.Identifier {
	out := slices.Clone(data)
	out[len(out)-1] += "_dlq"
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
	return fmt.Sprintf("commit %s to %s is in, but its dead letters are not in %s yet (the next sink session, or floe maintain, adds them): %v",
		e.Commit, e.Table, e.DeadLetters, e.Err)
}

func (e *DeadLettersPendingError) Unwrap() error { return e.Err }

// deadLettersApplied returns the ids of the data table's commits whose
// dead letters the dead-letter table's snapshots added.
func (t *Table) deadLettersApplied() map[string]bool {
	applied := map[string]bool{}
	for _, s := range t.tbl.Metadata().Snapshots() {
		if s.Summary != nil {
			if id := s.Summary.Properties[KeyDeadLettersFor]; id != "" {
				applied[id] = true
			}
		}
	}
	return applied
}

// addDeadLetters appends files to the dead-letter table t in one snapshot
// for the data table's commit id, unless a snapshot for it is there
// already (an earlier attempt whose outcome was unknown, or another
// process rolling forward).
func (t *Table) addDeadLetters(ctx context.Context, log *slog.Logger, id string, files []iceberg.DataFile) error {
	return t.appendForCommit(ctx, log, id, func(txn *table.Transaction, props iceberg.Properties) error {
		return txn.AddDataFiles(ctx, files, props, table.WithoutDuplicateCheck())
	})
}

// appendForCommit commits add to t for the data table's commit id, once:
// it retries lost races after reloading, and stops when a snapshot for id
// is in.
func (t *Table) appendForCommit(ctx context.Context, log *slog.Logger, id string, add func(*table.Transaction, iceberg.Properties) error) error {
	if log == nil {
		log = slog.Default()
	}
	props := iceberg.Properties{KeyDeadLettersFor: id}
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
		if t.deadLettersApplied()[id] {
			return nil
		}
		txn := t.tbl.NewTransaction()
		err := txn.AssertRefSnapshotID(table.MainBranch)
		if err == nil {
			err = add(txn, props)
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

// RollForwardDeadLetters adds to the dead-letter table dlq the dead
// letters of every commit of t's ledger that lists files of dlq not in it:
// a writer stopped between its commit and adding them. It returns how many
// commits it completed. Commits are recognised by the dead-letter
// snapshots' KeyDeadLettersFor and, where those were expired, by their
// files being live.
func (t *Table) RollForwardDeadLetters(ctx context.Context, dlq *Table, log *slog.Logger) (int, error) {
	l, err := t.Ledger()
	if err != nil {
		return 0, fmt.Errorf("read ledger of %s to find pending dead letters: %w", t.Name(), err)
	}
	var pending []mapping.Commit
	applied := dlq.deadLettersApplied()
	for _, c := range l.Commits {
		if len(c.DeadLetterFiles) > 0 && c.DeadLetterTable == dlq.Name() && !applied[c.ID] {
			pending = append(pending, c)
		}
	}
	if len(pending) == 0 {
		return 0, nil
	}
	if err := dlq.Refresh(ctx); err != nil {
		return 0, err
	}
	files, err := dlq.Files(ctx, 0)
	if err != nil {
		return 0, fmt.Errorf("list the files of %s: %w", dlq.Name(), err)
	}
	live := map[string]bool{}
	for _, f := range files {
		live[f.Path] = true
	}
	applied = dlq.deadLettersApplied()
	done := 0
	for _, c := range pending {
		var missing []string
		for _, p := range c.DeadLetterFiles {
			if !live[p] {
				missing = append(missing, p)
			}
		}
		if applied[c.ID] || len(missing) == 0 {
			continue
		}
		if log == nil {
			log = slog.Default()
		}
		log.Info("adding the dead letters of a commit whose writer stopped before it added them", "table", dlq.Name(), "commit", c.ID, "files", len(missing))
		err := dlq.appendForCommit(ctx, log, c.ID, func(txn *table.Transaction, props iceberg.Properties) error {
			return txn.AddFiles(ctx, missing, props, false)
		})
		if err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}
