package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	floecat "github.com/floe-dev/floe/catalog"
)

// DropOptions configure Drop.
type DropOptions struct {
	// KeepFiles drops the tables from the catalog only; their files stay
	// under their locations. Otherwise the files are deleted too, where
	// the catalog can (catalog.PurgeableTable).
	KeepFiles bool
	// DryRun lists what would be dropped and drops nothing.
	DryRun bool
}

// Dropped is one table Drop dropped (or, in a dry run, would drop).
type Dropped struct {
	Table    string `json:"table"`
	Location string `json:"location"`
	// FilesDeleted is set when its files were deleted with it.
	FilesDeleted bool `json:"files_deleted"`
}

// Drop drops the data table ident and its dead-letter tables
// (Table.DeadLetterTables, and those of its namespace that hold its dead
// letters: a replay branch's), those first, so that a drop cut short is
// done by running it again. A dead-letter table is refused while its data
// table exists (drop the data table), and dropped alone once it is gone. Dropping cannot be undone: a
// table created by mistake, or whose topic is gone for good, is what it
// is for; a table floe never wrote is refused.
func Drop(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts DropOptions) ([]Dropped, error) {
	// Another tool's table holds that tool's rows, not floe's: floe's
	// advice once sent users to drop one (from a new-user run).
	if tbl, err := cat.LoadTable(ctx, ident); err == nil && neverWritten(tbl) {
		name := strings.Join(ident, ".")
		return nil, fmt.Errorf("table %s is not floe's: another tool created it and floe never wrote it (it has no floe property or commit), so floe drop leaves it; drop it with that tool if it is to go (in Spark SQL: DROP TABLE %s)", name, name)
	}
	t, err := Open(ctx, cat, ident, OpenOptions{})
	if err != nil {
		return nil, err
	}
	var dlqs []*Table
	if of := t.tbl.Properties()[PropDeadLettersOf]; of != "" {
		// Alone only once its data table is gone (dropped by a floe
		// that left it behind, or by another tool).
		_, err := Open(ctx, cat, identOf(of), OpenOptions{})
		if err == nil {
			return nil, fmt.Errorf("%s is the dead-letter table of %s, whose ledger names it: drop %s, which drops it too", t.Name(), of, of)
		}
		if !errors.Is(err, ErrTableNotFound) {
			return nil, fmt.Errorf("open %s, whose dead letters %s holds: %w", of, t.Name(), err)
		}
	} else if dlqs, err = t.allDeadLetterTables(ctx); err != nil {
		return nil, err
	}
	var out []Dropped
	for _, d := range append(dlqs, t) {
		dropped := Dropped{Table: d.Name(), Location: d.tbl.Location()}
		if !opts.DryRun {
			if dropped.FilesDeleted, err = drop(ctx, cat, d.ident, opts.KeepFiles); err != nil {
				return out, fmt.Errorf("drop %s: %w", d.Name(), err)
			}
		}
		out = append(out, dropped)
	}
	return out, nil
}

// allDeadLetterTables is DeadLetterTables with the tables of t's
// namespace that hold t's dead letters (PropDeadLettersOf) but that no
// ledger or property of t names: a replay onto a branch creates its own
// (BranchDeadLetterName), which it names only once a dead letter needs it.
func (t *Table) allDeadLetterTables(ctx context.Context) ([]*Table, error) {
	dlqs, err := t.DeadLetterTables(ctx)
	if err != nil {
		return nil, err
	}
	for ident, err := range t.cat.ListTables(ctx, t.ident[:len(t.ident)-1]) {
		if err != nil {
			return nil, fmt.Errorf("list the tables beside %s: %w", t.Name(), err)
		}
		name := strings.Join(ident, ".")
		if name == t.Name() || slices.ContainsFunc(dlqs, func(d *Table) bool { return d.Name() == name }) {
			continue
		}
		d, err := Open(ctx, t.cat, ident, OpenOptions{})
		if err != nil {
			continue // not a table floe can open: not one of its dead-letter tables
		}
		if d.tbl.Properties()[PropDeadLettersOf] == t.Name() {
			dlqs = append(dlqs, d)
		}
	}
	return dlqs, nil
}

// drop drops ident, with its files unless keepFiles, and reports whether
// they were deleted.
func drop(ctx context.Context, cat catalog.Catalog, ident table.Identifier, keepFiles bool) (bool, error) {
	if p, ok := cat.(catalog.PurgeableTable); ok && !keepFiles {
		err := p.PurgeTable(ctx, ident)
		if !errors.Is(err, floecat.ErrPurgeUnsupported) {
			return err == nil, err
		}
	}
	return false, cat.DropTable(ctx, ident)
}
