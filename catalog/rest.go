package catalog

import (
	"context"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// restCatalog is an Iceberg REST catalog whose tables open their storage
// with floe's S3 configuration in the context (attach). iceberg-go's S3 IO
// takes it as the base and still applies the table's s3.* properties over
// it (endpoint, region, a key pair, addressing: the server's, vended
// credentials included, win), so what changes is the HTTP client and
// withoutResponseIDs: without them, an S3 error whose text held "301" by
// chance (a request ID, an object key, a port such as 30100) read "file
// does not exist", which a sink took for a lost file and stopped on
// instead of retrying (TestRESTTableS3ErrorsAreNotMissing).
//
// The tables it returns are rebuilt with it as their catalog, so that a
// table's Refresh keeps the configuration. They plan their scans locally,
// as every floe scan does: iceberg-go plans remotely only when asked
// (table.WithScanPlanningMode), and floe never asks.
type restCatalog struct {
	icecat.Catalog
	st *s3Storage
}

// own returns tbl rebuilt to open its storage with the configuration. A
// table whose properties ask for what only iceberg-go's own configuration
// does (see sharesConfig) is returned as it is; what the server sends
// beside the table's metadata, floe cannot see.
func (r *restCatalog) own(tbl *table.Table) *table.Table {
	if tbl == nil || !sharesConfig(tbl.Properties()) {
		return tbl
	}
	fsys := tbl.FS
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(),
		func(ctx context.Context) (iceio.IO, error) { return fsys(r.st.attach(ctx)) },
		r, table.WithMetricsReporter(tbl.MetricsReporter()))
}

func (r *restCatalog) CreateTable(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, opts ...icecat.CreateTableOpt) (*table.Table, error) {
	tbl, err := r.Catalog.CreateTable(ctx, ident, sc, opts...)
	return r.own(tbl), err
}

func (r *restCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := r.Catalog.LoadTable(ctx, ident)
	return r.own(tbl), err
}

func (r *restCatalog) RenameTable(ctx context.Context, from, to table.Identifier) (*table.Table, error) {
	tbl, err := r.Catalog.RenameTable(ctx, from, to)
	return r.own(tbl), err
}

// PurgeTable asks the server to drop the table and delete its files.
func (r *restCatalog) PurgeTable(ctx context.Context, ident table.Identifier) error {
	p, ok := r.Catalog.(icecat.PurgeableTable)
	if !ok {
		return ErrPurgeUnsupported
	}
	return p.PurgeTable(ctx, ident)
}

// Close releases the REST client's idle connections.
func (r *restCatalog) Close() error {
	if c, ok := r.Catalog.(icecat.Closer); ok {
		return c.Close()
	}
	return nil
}
