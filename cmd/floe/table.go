package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/snapshot"
)

// tableFlags are the flags that name a table and where it lives.
type tableFlags struct {
	table     string
	catalog   string
	warehouse string
}

func (f *tableFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.table, "table", "", "Iceberg table as NAMESPACE.TABLE (required)")
	fs.StringVar(&f.catalog, "catalog", snapshot.DefaultCatalog, "catalog: a SQLite file path")
	fs.StringVar(&f.warehouse, "warehouse", snapshot.DefaultWarehouse, "warehouse root for new tables: a path or file:// URI")
}

// open opens the catalog and the table; create makes a missing table.
func (f *tableFlags) open(ctx context.Context, opts snapshot.OpenOptions) (*snapshot.Table, error) {
	if f.table == "" {
		return nil, fmt.Errorf("missing --table NAMESPACE.TABLE")
	}
	ident, err := snapshot.ParseIdent(f.table)
	if err != nil {
		return nil, err
	}
	cat, err := snapshot.OpenCatalog(ctx, snapshot.CatalogConfig{Catalog: f.catalog, Warehouse: f.warehouse})
	if err != nil {
		return nil, err
	}
	return snapshot.Open(ctx, cat, ident, opts)
}
