package catalog

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// rivalFirst is a catalog whose CreateTable lets a rival creator register
// the table first and then answers as SQLite does the loser whose
// transaction began before the rival's commit: SQLITE_BUSY, at once,
// whatever the busy timeout. Real processes hit it only under load (a
// CI run of TestConcurrentCreatorsOfOneTable did).
type rivalFirst struct{ icecat.Catalog }

func (c rivalFirst) CreateTable(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, opts ...icecat.CreateTableOpt) (*table.Table, error) {
	if _, err := c.Catalog.CreateTable(ctx, ident, sc, opts...); err != nil {
		return nil, err
	}
	return nil, errors.New("failed to create table: database is locked (5) (SQLITE_BUSY)")
}

// TestCreateTableBusyAfterRival: a creator that hears SQLITE_BUSY while a
// rival registered the table learns that it exists
// (ErrTableAlreadyExists, on which floe loads it), not that the catalog
// failed.
func TestCreateTableBusyAfterRival(t *testing.T) {
	dir := t.TempDir()
	cat, err := Open(t.Context(), Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	g, ok := cat.(*guardedCatalog)
	if !ok {
		t.Fatalf("Open returned a %T", cat)
	}
	if err := g.CreateNamespace(t.Context(), table.Identifier{"lake"}, nil); err != nil {
		t.Fatal(err)
	}
	g.Catalog = rivalFirst{g.Catalog}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	if _, err := g.CreateTable(t.Context(), table.Identifier{"lake", "t"}, sc); !errors.Is(err, icecat.ErrTableAlreadyExists) {
		t.Fatalf("err = %v, want ErrTableAlreadyExists", err)
	}
}
