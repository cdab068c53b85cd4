package catalog

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"net/url"
	"strings"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// guardedCatalog is a SQL or Glue catalog that refuses to create a table in
// a location another catalog already uses, and classifies every error it
// returns (see explain), so that every command that opens tables through
// it reports a catalog or storage failure the same way.
type guardedCatalog struct {
	icecat.Catalog
	warehouse string
	bucket    string // the warehouse's bucket; empty when it is not on S3
	props     iceberg.Properties
	st        *s3Storage // nil: S3 access was not resolved
	log       *slog.Logger
}

// explain classifies an error of a catalog call. The call talks to two
// peers: the catalog itself (a database, Glue) and the object store that
// holds the tables' metadata files. An error of an S3 request is the
// object store's; any other failure to reach an address is the catalog's,
// the only other peer.
func (g *guardedCatalog) explain(err error) error {
	switch {
	case err == nil || classified(err):
		return err
	case storageKind(err) != nil && g.st != nil:
		return g.st.explain(err, g.bucket)
	case storageKind(err) != nil:
		return Explain(err)
	}
	return explainCatalog(err)
}

// CreateTable creates the table unless its default location already holds
// Iceberg metadata (then the table belongs to another catalog, or was
// dropped without purging, and two catalogs writing one location would
// corrupt it).
func (g *guardedCatalog) CreateTable(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, opts ...icecat.CreateTableOpt) (*table.Table, error) {
	if _, err := g.Catalog.LoadTable(ctx, ident); err == nil {
		return nil, fmt.Errorf("create table %s: %w", strings.Join(ident, "."), icecat.ErrTableAlreadyExists)
	}
	if g.warehouse != "" {
		ns := strings.Join(icecat.NamespaceFromIdent(ident), ".")
		loc, err := url.JoinPath(g.warehouse, ns+".db", icecat.TableNameFromIdent(ident))
		if err != nil {
			return nil, fmt.Errorf("table location of %s: %w", strings.Join(ident, "."), err)
		}
		if err := g.checkLocationFree(ctx, strings.Join(ident, "."), loc); err != nil {
			return nil, err
		}
	}
	tbl, err := g.Catalog.CreateTable(ctx, ident, sc, opts...)
	return tbl, g.explain(err)
}

// checkLocationFree fails with ErrOwnedByAnotherCatalog when loc/metadata
// holds a metadata.json.
func (g *guardedCatalog) checkLocationFree(ctx context.Context, name, loc string) error {
	fsys, err := iceio.LoadFS(ctx, g.props, loc)
	if err != nil {
		return fmt.Errorf("open storage of %s: %w", loc, g.explain(err))
	}
	lfs, ok := fsys.(iceio.ListableIO)
	if !ok {
		return nil
	}
	var found string
	errFound := errors.New("found")
	err = lfs.WalkDir(loc+"/metadata", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".metadata.json") || strings.HasSuffix(path, ".metadata.json.gz")) {
			found = path
			return errFound
		}
		return nil
	})
	switch {
	case found != "":
		return check(fmt.Errorf("%w: table %s is not in this catalog, but its location %s already holds Iceberg metadata (%s): "+
			"the table is probably registered in another catalog (another catalog, or another catalog name: SQL catalogs only see tables of their own name), "+
			"or was dropped without purging its files; open the catalog that owns it, or sink into another table",
			ErrOwnedByAnotherCatalog, name, loc, found), SettingCatalog, SettingName)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		// Some S3-compatible servers answer a listing of a missing prefix
		// with an error; creating the table reports real storage problems.
		g.log.Debug("cannot list a new table's location; assuming it is free", "location", loc, "err", err)
	}
	return nil
}

// The other calls pass through, their errors classified.

func (g *guardedCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	meta, loc, err := g.Catalog.CommitTable(ctx, ident, reqs, updates)
	return meta, loc, g.explain(err)
}

func (g *guardedCatalog) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		for ident, err := range g.Catalog.ListTables(ctx, ns) {
			if !yield(ident, g.explain(err)) {
				return
			}
		}
	}
}

func (g *guardedCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := g.Catalog.LoadTable(ctx, ident)
	return tbl, g.explain(err)
}

func (g *guardedCatalog) DropTable(ctx context.Context, ident table.Identifier) error {
	return g.explain(g.Catalog.DropTable(ctx, ident))
}

func (g *guardedCatalog) RenameTable(ctx context.Context, from, to table.Identifier) (*table.Table, error) {
	tbl, err := g.Catalog.RenameTable(ctx, from, to)
	return tbl, g.explain(err)
}

func (g *guardedCatalog) CheckTableExists(ctx context.Context, ident table.Identifier) (bool, error) {
	ok, err := g.Catalog.CheckTableExists(ctx, ident)
	return ok, g.explain(err)
}

func (g *guardedCatalog) ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error) {
	nss, err := g.Catalog.ListNamespaces(ctx, parent)
	return nss, g.explain(err)
}

func (g *guardedCatalog) CreateNamespace(ctx context.Context, ns table.Identifier, props iceberg.Properties) error {
	return g.explain(g.Catalog.CreateNamespace(ctx, ns, props))
}

func (g *guardedCatalog) DropNamespace(ctx context.Context, ns table.Identifier) error {
	return g.explain(g.Catalog.DropNamespace(ctx, ns))
}

func (g *guardedCatalog) CheckNamespaceExists(ctx context.Context, ns table.Identifier) (bool, error) {
	ok, err := g.Catalog.CheckNamespaceExists(ctx, ns)
	return ok, g.explain(err)
}

func (g *guardedCatalog) LoadNamespaceProperties(ctx context.Context, ns table.Identifier) (iceberg.Properties, error) {
	props, err := g.Catalog.LoadNamespaceProperties(ctx, ns)
	return props, g.explain(err)
}

func (g *guardedCatalog) UpdateNamespaceProperties(ctx context.Context, ns table.Identifier, removals []string, updates iceberg.Properties) (icecat.PropertiesUpdateSummary, error) {
	sum, err := g.Catalog.UpdateNamespaceProperties(ctx, ns, removals, updates)
	return sum, g.explain(err)
}
