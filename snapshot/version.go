package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// versionCatalog answers LoadTable of one table with that table as one
// metadata file holds it, and refuses every commit: a version is read,
// never written. Other tables are the catalog's.
type versionCatalog struct {
	catalog.Catalog
	tbl *table.Table
}

func (c versionCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if slices.Equal(ident, c.tbl.Identifier()) {
		return c.tbl, nil
	}
	return c.Catalog.LoadTable(ctx, ident)
}

func (c versionCatalog) CommitTable(context.Context, table.Identifier, []table.Requirement, []table.Update) (table.Metadata, string, error) {
	return nil, "", errors.New("a table version read from its metadata file is read only")
}

// OpenVersion opens table ident, read only, as the metadata file at
// location holds it: an earlier version, such as the one an audit report
// names (its evidence digest is that version's whatever was committed
// since). The file is read with the table's storage as the catalog has it
// now, and must be of the same table (its UUID). The ledger archive
// segments the version names may have been merged into a later segment
// and deleted since (floe maintain); archived entries are never changed or
// dropped, so the table's segments now are read instead, and the version's
// ledger, the ancestry of its heads, is the same.
func OpenVersion(ctx context.Context, cat catalog.Catalog, ident table.Identifier, location string, opts OpenOptions) (*Table, error) {
	if opts.Create || opts.Write {
		return nil, errors.New("open a table version: a version is read only")
	}
	now, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	then, err := table.NewFromLocation(ctx, ident, location, now.FS, cat)
	if err != nil {
		return nil, fmt.Errorf("read the metadata file %s: %w", location, err)
	}
	if was, is := then.Metadata().TableUUID(), now.Metadata().TableUUID(); was != is {
		return nil, fmt.Errorf("the metadata file %s is of another table (UUID %s) than %s (UUID %s): give a metadata file of this table, such as an audit report's evidence.metadata_location",
			location, was, strings.Join(ident, "."), is)
	}
	t, err := Open(ctx, versionCatalog{Catalog: cat, tbl: then}, ident, opts)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !namesArchive(then) {
		return t, err
	}
	mb, berr := table.MetadataBuilderFromBase(then.Metadata(), location)
	if berr != nil {
		return nil, berr
	}
	var gone []string
	for k := range then.Properties() {
		if isArchiveProp(k) {
			gone = append(gone, k)
		}
	}
	kept := map[string]string{}
	for k, v := range now.Properties() {
		if isArchiveProp(k) {
			kept[k] = v
		}
	}
	if err := mb.RemoveProperties(gone); err != nil {
		return nil, err
	}
	if len(kept) > 0 {
		if err := mb.SetProperties(kept); err != nil {
			return nil, err
		}
	}
	meta, berr := mb.Build()
	if berr != nil {
		return nil, berr
	}
	patched := table.New(ident, meta, location, now.FS, cat)
	t, err2 := Open(ctx, versionCatalog{Catalog: cat, tbl: patched}, ident, opts)
	if err2 != nil {
		return nil, fmt.Errorf("%w (and with the table's ledger archive as it is now: %w)", err, err2)
	}
	return t, nil
}

// namesArchive reports whether tbl's properties name ledger archive files.
func namesArchive(tbl *table.Table) bool {
	return slices.ContainsFunc(slices.Collect(maps.Keys(tbl.Properties())), isArchiveProp)
}

func isArchiveProp(k string) bool {
	return strings.HasPrefix(k, PropLedgerSegmentPrefix) || strings.HasPrefix(k, PropLedgerDigestPrefix) || k == PropLedgerArchive
}
