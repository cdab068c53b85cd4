package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
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
// ledger, the ancestry of its heads, is the same. Likewise the ranges
// files of the version's snapshots that expired since: maintenance
// deletes them once the archive holds their ranges, which are read from
// there.
func OpenVersion(ctx context.Context, cat catalog.Catalog, ident table.Identifier, location string, opts OpenOptions) (*Table, error) {
	if opts.Create || opts.Write {
		return nil, errors.New("open a table version: a version is read only")
	}
	now, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	if !strings.Contains(location, "://") && strings.HasPrefix(now.MetadataLocation(), "file://") {
		// A local path, as a file warehouse's locations are written: the
		// digest covers the location's text.
		abs, err := filepath.Abs(location)
		if err != nil {
			return nil, err
		}
		location = "file://" + filepath.ToSlash(abs)
	}
	// s3://, s3a:// and s3n:// name the same object (the last two are
	// Hadoop's, as Spark users copy them): the digest covers the location
	// as the table writes it.
	s3 := func(loc string) (scheme, rest string, ok bool) {
		scheme, rest, ok = strings.Cut(loc, "://")
		return scheme, rest, ok && (scheme == "s3" || scheme == "s3a" || scheme == "s3n")
	}
	if written, _, ok := s3(now.MetadataLocation()); ok {
		if _, rest, ok := s3(location); ok {
			location = written + "://" + rest
		}
	}
	then, err := table.NewFromLocation(ctx, ident, location, now.FS, cat)
	if err != nil {
		return nil, fmt.Errorf("read the metadata file %s: %w", location, err)
	}
	if was, is := then.Metadata().TableUUID(), now.Metadata().TableUUID(); was != is {
		return nil, fmt.Errorf("the metadata file %s is of another table (UUID %s) than %s (UUID %s): give a metadata file of this table, such as an audit report's evidence.metadata_location",
			location, was, strings.Join(ident, "."), is)
	}
	if then, err = withArchivedRanges(ctx, cat, ident, then, now); err != nil {
		return nil, err
	}
	t, err := Open(ctx, versionCatalog{Catalog: cat, tbl: then}, ident, opts)
	if err == nil {
		t.version = true
	}
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
	t.version = true
	return t, nil
}

// IsVersion reports whether the Table is an earlier version of its table,
// opened by OpenVersion: read only, its tables beside it (dead-letter
// tables) as they are now.
func (t *Table) IsVersion() bool { return t.version }

// namesArchive reports whether tbl's properties name ledger archive files.
func namesArchive(tbl *table.Table) bool {
	return slices.ContainsFunc(slices.Collect(maps.Keys(tbl.Properties())), isArchiveProp)
}

func isArchiveProp(k string) bool {
	return strings.HasPrefix(k, PropLedgerSegmentPrefix) || strings.HasPrefix(k, PropLedgerDigestPrefix) || k == PropLedgerArchive
}

// withArchivedRanges returns then, a version of the table now is, with
// the ledger entries of its snapshots that keep their ranges in a ranges
// file and expired since taken from the archive of main as it is now,
// ranges inline: maintenance deletes such a snapshot's ranges file once
// the archive holds its ranges. The entries decode to the same commits.
func withArchivedRanges(ctx context.Context, cat catalog.Catalog, ident table.Identifier, then, now *table.Table) (*table.Table, error) {
	gone := map[int64]bool{}
	for _, s := range then.Metadata().Snapshots() {
		if s.Summary == nil || now.Metadata().SnapshotByID(s.SnapshotID) != nil {
			continue
		}
		if _, ok, _ := mapping.RangesRefOf(s.SnapshotID, s.Summary.Properties); ok {
			gone[s.SnapshotID] = true
		}
	}
	if len(gone) == 0 {
		return then, nil
	}
	cur, err := Open(ctx, cat, ident, OpenOptions{})
	if err != nil {
		return nil, err
	}
	entries := map[int64]map[string]string{}
	for c, err := range cur.CommitsOf(ctx, 0, gone) {
		if err != nil {
			return nil, fmt.Errorf("read the archived ledger entries of the version's expired snapshots: %w", err)
		}
		if entries[c.SnapshotID], err = c.Encode(); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(then.Metadata())
	if err != nil {
		return nil, err
	}
	// Numbers as written: a snapshot id has more digits than a float64.
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	snaps, _ := doc["snapshots"].([]any)
	for _, sn := range snaps {
		m, _ := sn.(map[string]any)
		n, _ := m["snapshot-id"].(json.Number)
		id, _ := n.Int64()
		entry, ok := entries[id]
		summary, _ := m["summary"].(map[string]any)
		if !ok || summary == nil {
			continue
		}
		for k := range summary {
			if strings.HasPrefix(k, "floe.") {
				delete(summary, k)
			}
		}
		for k, v := range entry {
			summary[k] = v
		}
	}
	if b, err = json.Marshal(doc); err != nil {
		return nil, err
	}
	meta, err := table.ParseMetadataBytes(b)
	if err != nil {
		return nil, fmt.Errorf("the version's metadata with its archived ledger entries: %w", err)
	}
	return table.New(ident, meta, then.MetadataLocation(), now.FS, cat), nil
}
