package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// guardedCatalog is a SQL or Glue catalog that refuses to create a table in
// a location another catalog already uses, and classifies every error it
// returns (see explain), so that every command that opens tables through
// it reports a catalog or storage failure the same way.
//
// It also makes all S3 I/O of its tables use the S3 configuration and HTTP
// client resolved once when it was opened (see storage and own): iceberg-go
// opens the storage for every data file, commit and catalog load, and
// configured on its own it builds a new AWS configuration, S3 client and
// transport each time, which a long-running sink accumulates by the
// thousand.
type guardedCatalog struct {
	icecat.Catalog
	spec      string // the catalog as --catalog names it, redacted
	name      string // the catalog's name (Config.Name), which SQL catalogs store
	warehouse string // empty: creating a table needs a location
	bucket    string // the warehouse's bucket; empty when it is not on S3
	// bucketMissing says that Open found the warehouse's bucket missing
	// at st's endpoint and went on (Config.Existing): reads of its files
	// fail as missing files, which classify says as the bucket's absence.
	bucketMissing bool
	props         iceberg.Properties
	st            *s3Storage // nil: S3 access was not resolved
	// shareS3 says that st's configuration is handed to iceberg-go's S3 IO
	// (see sharesConfig).
	shareS3 bool
	log     *slog.Logger
	// file is the SQLite catalog's file as opened (nil for other kinds):
	// writes check that it is still there (catalogFile.check).
	file *catalogFile
	// create, when not nil, opens the SQLite catalog that
	// Config.CreateOnRegister left uncreated (Catalog is nil till then):
	// Register calls it (createNow).
	create func(context.Context) (icecat.Catalog, *catalogFile, error)
}

// createNow creates and opens the catalog that Config.CreateOnRegister
// left uncreated, if any.
func (g *guardedCatalog) createNow(ctx context.Context) error {
	if g.create == nil {
		return nil
	}
	cat, file, err := g.create(ctx)
	if err != nil {
		return err
	}
	g.Catalog, g.file, g.create = cat, file, nil
	return nil
}

// Close closes the catalog's connection when it has one (SQL catalogs).
// Commands that run once leave it to the process's exit; a caller that
// opens a catalog among other work closes it (catalogs of icecat's
// interface have no Close, so it asserts io.Closer).
func (g *guardedCatalog) Close() error {
	if c, ok := g.Catalog.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// storage returns ctx for a call that may open the tables' storage,
// carrying the catalog's S3 configuration when it is shared.
func (g *guardedCatalog) storage(ctx context.Context) context.Context {
	if !g.shareS3 {
		return ctx
	}
	return g.st.attach(ctx)
}

// own returns tbl rebuilt to open its storage as tbl does, through
// storage, and to commit through this catalog. The caller's context is
// all that reaches iceberg-go when a table writes data files, reads
// manifests or opens its storage to delete, list or read files, so the
// table's storage opener adds the configuration; and commits, which write
// metadata files, go through g.CommitTable, which adds it too (and
// classifies their errors like any other call of this catalog). Tables
// iceberg-go derives from it (commits' results, snapshot's rebuilt tables)
// keep both.
func (g *guardedCatalog) own(tbl *table.Table) *table.Table {
	if tbl == nil {
		return nil
	}
	fsys := tbl.FS
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(),
		func(ctx context.Context) (iceio.IO, error) { return fsys(g.storage(ctx)) },
		g, table.WithMetricsReporter(tbl.MetricsReporter()))
}

// explain classifies an error of a catalog call. The call talks to two
// peers: the catalog itself (a database, Glue) and the object store that
// holds the tables' metadata files. An error of an S3 request is the
// object store's; any other failure to reach an address is the catalog's,
// the only other peer.
//
// A call its context interrupted fails with whatever the driver makes of
// that (database/sql reports sql.ErrTxDone when the context ends inside a
// transaction); the error then also says it was interrupted, so that
// callers that stop quietly on cancellation recognise it.
func (g *guardedCatalog) explain(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return &InterruptedError{Err: g.classify(err), Cause: ctx.Err()}
	}
	return g.classify(err)
}

// InterruptedError is the failure of a catalog call whose context ended
// while it ran: Err is what the driver made of that (database/sql reports
// sql.ErrTxDone when the context ends inside a transaction), Cause the
// context's error. A caller that stops quietly on an interrupt takes it
// for one.
type InterruptedError struct {
	Err, Cause error
}

func (e *InterruptedError) Error() string   { return fmt.Sprintf("%v (interrupted: %v)", e.Err, e.Cause) }
func (e *InterruptedError) Unwrap() []error { return []error{e.Err, e.Cause} }

// classify classifies an error of a catalog call (see explain).
func (g *guardedCatalog) classify(err error) error {
	switch {
	case err == nil || classified(err):
		return err
	case g.bucketMissing && g.st != nil && errors.Is(err, fs.ErrNotExist) && strings.Contains(err.Error(), "s3://"+g.bucket+"/"):
		// gocloud reads a file of a bucket the endpoint lacks as a file
		// that does not exist, which reads like lost data (seen by a
		// deployment walk-through pointed at the wrong S3 server).
		return check(fmt.Errorf("%w: bucket %q at %s, which the table's files are in: check the S3 endpoint, and the profile or credentials it comes from (the bucket is on another server or account); nothing is lost: %w",
			ErrBucketNotFound, g.bucket, g.st.describe(), err), SettingS3Endpoint, SettingWarehouse)
	case storageKind(err) != nil && g.st != nil:
		return g.st.explain(err, g.bucket)
	case storageKind(err) != nil:
		return Explain(err)
	case g.st == nil && fromS3(err):
		// No S3 setting was given and the warehouse is not on S3, so
		// iceberg-go read the table's s3:// files with the AWS SDK's bare
		// defaults (no region, no endpoint): that is why an S3 request failed
		// in a way Explain does not classify.
		return check(fmt.Errorf("no S3 access is configured for the table's s3:// files (flags, AWS_* variables or --config): %w", err),
			SettingS3Endpoint, SettingS3Region)
	case strings.EqualFold(g.spec, string(Glue)) && (isUnreachable(err) || isTimeout(err)):
		// The SDK's error leaves the address out, and --catalog (glue)
		// is not where the endpoint is set (a new user's run on moto).
		return check(fmt.Errorf("%w: nothing answers at the Glue endpoint %s: %w", ErrCatalogUnreachable, g.glueEndpoint(), err), SettingCatalog)
	}
	return explainCatalog(err)
}

// glueEndpoint names the endpoint a Glue catalog's calls go to and the
// setting it came from, as the AWS SDK picks it: the catalog property
// glue.endpoint, else AWS_ENDPOINT_URL_GLUE, else AWS_ENDPOINT_URL, else
// AWS's own for the region.
func (g *guardedCatalog) glueEndpoint() string {
	if e := g.props[glue.Endpoint]; e != "" {
		return e + " (set by --catalog-prop glue.endpoint)"
	}
	for _, v := range []string{"AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL"} {
		if e := os.Getenv(v); e != "" {
			return e + " (set by " + v + ")"
		}
	}
	region := g.props[glue.Region]
	if region == "" && g.st != nil {
		region = g.st.cfg.Region
	}
	return fmt.Sprintf("of AWS in region %q (AWS_ENDPOINT_URL_GLUE or --catalog-prop glue.endpoint=URL names another)", region)
}

// CreateTable creates the table unless its default location already holds
// Iceberg metadata (then the table belongs to another catalog, or was
// dropped without purging, and two catalogs writing one location would
// corrupt it); a location given is checked alike. Without a warehouse, a
// table given no location is a *ConfigError.
func (g *guardedCatalog) CreateTable(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, opts ...icecat.CreateTableOpt) (*table.Table, error) {
	var c icecat.CreateTableCfg
	for _, o := range opts {
		o(&c)
	}
	if err := g.file.check(); err != nil {
		return nil, err
	}
	if g.warehouse == "" && c.Location == "" {
		return nil, &ConfigError{Setting: SettingWarehouse,
			Want: fmt.Sprintf("where catalog %s creates new tables, e.g. s3://BUCKET/PREFIX (only a run that creates a table needs it)", g.spec)}
	}
	ctx = g.storage(ctx)
	if _, err := g.Catalog.LoadTable(ctx, ident); err == nil {
		return nil, fmt.Errorf("create table %s: %w", strings.Join(ident, "."), icecat.ErrTableAlreadyExists)
	}
	// Without a warehouse, the location given is checked.
	loc := c.Location
	if g.warehouse != "" {
		ns := strings.Join(icecat.NamespaceFromIdent(ident), ".")
		var err error
		if loc, err = url.JoinPath(g.warehouse, ns+".db", icecat.TableNameFromIdent(ident)); err != nil {
			return nil, fmt.Errorf("table location of %s: %w", strings.Join(ident, "."), err)
		}
	}
	if err := g.checkLocationFree(ctx, strings.Join(ident, "."), loc); err != nil {
		if g.registeredMeanwhile(ctx, ident) {
			return nil, fmt.Errorf("create table %s: %w", strings.Join(ident, "."), icecat.ErrTableAlreadyExists)
		}
		return nil, err
	}
	tbl, err := g.Catalog.CreateTable(ctx, ident, sc, opts...)
	// SQLite answers a writer whose transaction began before another
	// one's commit with SQLITE_BUSY at once, whatever the busy timeout:
	// of creators starting together, one registers the table and others
	// may hear that.
	if err != nil && sqliteBusy(err) && g.registeredMeanwhile(ctx, ident) {
		return nil, fmt.Errorf("create table %s: %w", strings.Join(ident, "."), icecat.ErrTableAlreadyExists)
	}
	return g.own(tbl), g.explain(ctx, err)
}

// registeredMeanwhile reports whether table ident appears in the catalog
// within a couple of seconds. A creator writes the table's first metadata
// file and then registers it: metadata found at a location whose table
// the catalog does not have may be a concurrent creator's (the members of
// one sink group start together), not another catalog's.
func (g *guardedCatalog) registeredMeanwhile(ctx context.Context, ident table.Identifier) bool {
	for range 40 {
		if _, err := g.Catalog.LoadTable(ctx, ident); err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// HasWarehouse reports whether cat, as Open returned it, creates a table
// given no location: a REST catalog (its server chooses), or a SQL or
// Glue catalog opened with a warehouse.
func HasWarehouse(cat icecat.Catalog) bool {
	g, ok := cat.(*guardedCatalog)
	return !ok || g.warehouse != ""
}

// checkLocationFree fails with ErrOwnedByAnotherCatalog when loc/metadata
// holds a metadata.json.
func (g *guardedCatalog) checkLocationFree(ctx context.Context, name, loc string) error {
	fsys, err := iceio.LoadFS(ctx, g.props, loc)
	if err != nil {
		return fmt.Errorf("open storage of %s: %w", loc, g.explain(ctx, err))
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
			"or was dropped without purging its files (floe drop --keep-files), or its catalog was lost, "+
			"or a sink creating it was killed between writing its first metadata file and registering it; open the catalog that owns it, "+
			"put the table (back) into this one with floe register --table %s --location %s (it takes the newest metadata file), "+
			"or sink into another table",
			ErrOwnedByAnotherCatalog, name, loc, found, name, loc), SettingCatalog, SettingName)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		// Some S3-compatible servers answer a listing of a missing prefix
		// with an error; creating the table reports real storage problems.
		g.log.Debug("cannot list a new table's location; assuming it is free", "location", loc, "err", err)
	}
	return nil
}

// The other calls pass through, their errors classified; those that read or
// write metadata files get the shared S3 configuration, and the tables
// they return are owned (see own).

func (g *guardedCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if err := g.file.check(); err != nil {
		return nil, "", err
	}
	meta, loc, err := g.Catalog.CommitTable(g.storage(ctx), ident, reqs, updates)
	return meta, loc, g.explain(ctx, err)
}

func (g *guardedCatalog) ListTables(ctx context.Context, ns table.Identifier) iter.Seq2[table.Identifier, error] {
	return func(yield func(table.Identifier, error) bool) {
		for ident, err := range g.Catalog.ListTables(ctx, ns) {
			if !yield(ident, g.explain(ctx, err)) {
				return
			}
		}
	}
}

func (g *guardedCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := g.Catalog.LoadTable(g.storage(ctx), ident)
	return g.own(tbl), g.explain(ctx, err)
}

func (g *guardedCatalog) DropTable(ctx context.Context, ident table.Identifier) error {
	if err := g.file.check(); err != nil {
		return err
	}
	return g.explain(ctx, g.Catalog.DropTable(ctx, ident))
}

// PurgeTable drops the table and deletes its files, when the catalog can
// (icecat.PurgeableTable: the SQL and Glue catalogs do); ErrPurgeUnsupported
// otherwise, with nothing dropped.
//
// It deletes the files beside the table's metadata first (its data), then
// purges: iceberg-go drops the catalog entry before it deletes any file,
// so a purge cut short (a kill, an evicted pod) left a location that still
// held metadata under a name the catalog no longer had, which floe drop
// could not finish and floe sink refused to create again (found by
// review). Cut short now, the table is still in the catalog with its
// metadata, and a drop run again finishes; only the last step, deleting
// the metadata files, runs without a catalog entry.
func (g *guardedCatalog) PurgeTable(ctx context.Context, ident table.Identifier) error {
	p, ok := g.Catalog.(icecat.PurgeableTable)
	if !ok {
		return ErrPurgeUnsupported
	}
	tbl, err := g.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	if tbl.Properties().GetBool("gc.enabled", true) {
		if err := removeBesideMetadata(g.storage(ctx), tbl); err != nil {
			return g.explain(ctx, fmt.Errorf("delete the files of table %s: %w", strings.Join(ident, "."), err))
		}
	}
	return g.explain(ctx, p.PurgeTable(g.storage(ctx), ident))
}

// removeBesideMetadata deletes the files under tbl's location but outside
// its metadata folder. A table with gc.enabled=false keeps them, as
// iceberg-go's purge does.
func removeBesideMetadata(ctx context.Context, tbl *table.Table) error {
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	lfs, ok := fsys.(iceio.ListableIO)
	if !ok {
		return nil
	}
	// The walk may name files with or without the location's scheme
	// (file:///x against /x): paths are compared by LocationKey.
	ml := tbl.MetadataLocation()
	meta := LocationKey(ml[:strings.LastIndex(ml, "/")+1]) // path.Dir would fold s3:// to s3:/
	var files []string
	err = lfs.WalkDir(tbl.Location(), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case !d.IsDir() && !strings.HasPrefix(LocationKey(p), meta) && !strings.Contains(LocationKey(p), "/metadata/"):
			// Metadata goes last, in iceberg-go's purge, wherever it is.
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("list %s: %w", tbl.Location(), err)
	}
	if bulk, ok := fsys.(iceio.BulkRemovableIO); ok && len(files) > 0 {
		_, err := bulk.DeleteFiles(ctx, files)
		return err
	}
	for _, f := range files {
		if err := fsys.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// LocationKey is the location of a file without its scheme, by which two
// names of one file compare equal: manifests and metadata name a file as
// file:///dir/f where a listing of the storage may say /dir/f.
func LocationKey(p string) string {
	if u, err := url.Parse(p); err == nil && u.Scheme != "" {
		return u.Host + u.Path
	}
	return p
}

// ErrPurgeUnsupported is PurgeTable's error for a catalog that cannot
// delete a table's files: drop the table, and its files stay.
var ErrPurgeUnsupported = errors.New("this catalog cannot delete a table's files")

func (g *guardedCatalog) RenameTable(ctx context.Context, from, to table.Identifier) (*table.Table, error) {
	tbl, err := g.Catalog.RenameTable(g.storage(ctx), from, to)
	return g.own(tbl), g.explain(ctx, err)
}

func (g *guardedCatalog) CheckTableExists(ctx context.Context, ident table.Identifier) (bool, error) {
	ok, err := g.Catalog.CheckTableExists(ctx, ident)
	return ok, g.explain(ctx, err)
}

func (g *guardedCatalog) ListNamespaces(ctx context.Context, parent table.Identifier) ([]table.Identifier, error) {
	nss, err := g.Catalog.ListNamespaces(ctx, parent)
	return nss, g.explain(ctx, err)
}

func (g *guardedCatalog) CreateNamespace(ctx context.Context, ns table.Identifier, props iceberg.Properties) error {
	return g.explain(ctx, g.Catalog.CreateNamespace(ctx, ns, props))
}

func (g *guardedCatalog) DropNamespace(ctx context.Context, ns table.Identifier) error {
	return g.explain(ctx, g.Catalog.DropNamespace(ctx, ns))
}

func (g *guardedCatalog) CheckNamespaceExists(ctx context.Context, ns table.Identifier) (bool, error) {
	ok, err := g.Catalog.CheckNamespaceExists(ctx, ns)
	return ok, g.explain(ctx, err)
}

func (g *guardedCatalog) LoadNamespaceProperties(ctx context.Context, ns table.Identifier) (iceberg.Properties, error) {
	props, err := g.Catalog.LoadNamespaceProperties(ctx, ns)
	return props, g.explain(ctx, err)
}

func (g *guardedCatalog) UpdateNamespaceProperties(ctx context.Context, ns table.Identifier, removals []string, updates iceberg.Properties) (icecat.PropertiesUpdateSummary, error) {
	sum, err := g.Catalog.UpdateNamespaceProperties(ctx, ns, removals, updates)
	return sum, g.explain(ctx, err)
}
