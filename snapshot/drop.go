package snapshot

import (
	"context"
	"errors"
	"fmt"

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
// (Table.DeadLetterTables), those first, so that a drop cut short is done
// by running it again. A dead-letter table is refused: its data table's
// ledger names it (drop the data table). Dropping cannot be undone: a
// table created by mistake, or whose topic is gone for good, is what it
// is for.
func Drop(ctx context.Context, cat catalog.Catalog, ident table.Identifier, opts DropOptions) ([]Dropped, error) {
	t, err := Open(ctx, cat, ident, OpenOptions{})
	if err != nil {
		return nil, err
	}
	if of := t.tbl.Properties()[PropDeadLettersOf]; of != "" {
		return nil, fmt.Errorf("%s is the dead-letter table of %s, whose ledger names it: drop %s, which drops it too", t.Name(), of, of)
	}
	dlqs, err := t.DeadLetterTables(ctx)
	if err != nil {
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
