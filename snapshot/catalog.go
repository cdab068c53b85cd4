package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/driver/sqliteshim"
)

// Defaults of the zero-setup layout: everything under ./floe-data.
const (
	DefaultCatalog   = "floe-data/catalog.db"
	DefaultWarehouse = "floe-data/warehouse"
	// DefaultCatalogName is the name floe's SQL catalogs store in their
	// catalog_name column. Spark's and Trino's JDBC catalogs store theirs:
	// to share tables with them, use the same name.
	DefaultCatalogName = "floe"
)

// CatalogKind is the kind of catalog a CatalogConfig.Catalog names.
type CatalogKind string

// Catalog kinds.
const (
	// CatalogSQLite is iceberg-go's SQL catalog in a SQLite file: a path,
	// sqlite:// or file: URI.
	CatalogSQLite CatalogKind = "sqlite"
	// CatalogPostgres is iceberg-go's SQL catalog in PostgreSQL:
	// postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=...
	CatalogPostgres CatalogKind = "postgres"
	// CatalogREST is an Iceberg REST catalog: http:// or https:// URI.
	CatalogREST CatalogKind = "rest"
	// CatalogGlue is AWS Glue: the word glue.
	CatalogGlue CatalogKind = "glue"
)

// Kind returns the kind of catalog spec names (empty means SQLite).
func Kind(spec string) (CatalogKind, error) {
	lower := strings.ToLower(spec)
	switch {
	case lower == "glue":
		return CatalogGlue, nil
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return CatalogPostgres, nil
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		return CatalogREST, nil
	case strings.HasPrefix(lower, "sqlite://"), strings.HasPrefix(lower, "file:"), !strings.Contains(lower, "://"):
		return CatalogSQLite, nil
	}
	return "", fmt.Errorf("catalog %s: unsupported; want a SQLite file path, postgres://..., http(s)://... (REST) or glue", redact(spec))
}

// CatalogConfig says where the catalog and the warehouse are and how to
// reach them.
type CatalogConfig struct {
	// Catalog names the catalog; see Kind. Empty means DefaultCatalog.
	Catalog string
	// Name is the catalog's name: SQL catalogs store it with every table
	// (Spark's and Trino's JDBC catalogs use their catalog name), Glue and
	// REST ignore it. Empty means DefaultCatalogName.
	Name string
	// Warehouse is where new tables are created. For SQLite, PostgreSQL and
	// Glue: a local path, file:// URI or s3://bucket/prefix URI; empty means
	// DefaultWarehouse (SQLite) or is an error (PostgreSQL, Glue). For REST:
	// the warehouse name or location the server expects, passed through;
	// empty means the server's default.
	Warehouse string
	// S3 configures access to s3:// warehouses and tables.
	S3 S3Config
	// Token is a REST catalog's bearer token.
	Token string
	// Credential is a REST catalog's OAuth2 client credentials,
	// CLIENT_ID:CLIENT_SECRET, exchanged for a token at OAuth2ServerURI.
	Credential string
	// OAuth2ServerURI is the token endpoint for Credential; empty means the
	// catalog's own /v1/oauth/tokens.
	OAuth2ServerURI string
	// Scope is the OAuth2 scope requested with Credential; empty means
	// iceberg-go's default (catalog).
	Scope string
	// Props are extra catalog properties passed to iceberg-go as they are;
	// they override everything floe derives.
	Props map[string]string
	// Logger receives what opening the catalog and creating tables log
	// (S3 configuration, tolerated storage errors); nil means
	// slog.Default().
	Logger *slog.Logger
}

// OpenCatalog opens the catalog, on first use initialising a SQL catalog's
// tables. For s3:// warehouses it resolves S3 access from the AWS standard
// configuration and checks that the bucket answers, so that a missing
// bucket, rejected credentials or an unreachable endpoint are reported at
// start with what to fix (errors wrapping ErrBucketNotFound,
// ErrStorageCredentials, ErrStorageUnreachable). A catalog that does not
// answer or rejects its credentials is an error wrapping
// ErrCatalogUnreachable or ErrCatalogAuth.
//
// Tables created through the returned catalog are refused (with an error
// wrapping ErrOwnedByAnotherCatalog) when their location already holds
// Iceberg metadata this catalog does not know.
func OpenCatalog(ctx context.Context, cfg CatalogConfig) (catalog.Catalog, error) {
	spec := cfg.Catalog
	if spec == "" {
		spec = DefaultCatalog
	}
	kind, err := Kind(spec)
	if err != nil {
		return nil, err
	}
	name := cfg.Name
	if name == "" {
		name = DefaultCatalogName
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	props := iceberg.Properties{}
	wh := cfg.Warehouse
	if kind != CatalogREST {
		if wh == "" && kind != CatalogSQLite {
			return nil, fmt.Errorf("catalog %s: no warehouse: pass --warehouse s3://BUCKET/PREFIX (where new tables are created)", redact(spec))
		}
		if wh, err = warehouseURI(wh); err != nil {
			return nil, err
		}
	}
	if wh != "" {
		props["warehouse"] = wh
	}
	// S3 access: for an s3:// warehouse, and for REST and Glue, whose
	// tables live on S3 whatever the warehouse property says.
	var st *s3Storage
	bucket, prefix, onS3 := splitS3(wh)
	if onS3 || kind == CatalogGlue || (kind == CatalogREST && s3Configured(cfg.S3)) {
		if st, err = resolveS3(ctx, cfg.S3, log); err != nil {
			return nil, err
		}
		maps.Copy(props, st.props)
	}
	if onS3 {
		if err := st.check(ctx, bucket, prefix); err != nil {
			return nil, fmt.Errorf("warehouse %s: %w", wh, err)
		}
	}

	var cat catalog.Catalog
	switch kind {
	case CatalogSQLite:
		cat, err = openSQLite(ctx, name, spec, props, cfg.Props)
	case CatalogPostgres:
		cat, err = openPostgres(ctx, name, spec, props, cfg.Props)
	case CatalogREST:
		cat, err = openREST(ctx, name, spec, cfg, props)
	case CatalogGlue:
		cat, err = openGlue(st, props, cfg.Props)
	}
	if err != nil {
		return nil, err
	}
	if kind == CatalogREST {
		// The server chooses table locations and guards them.
		return cat, nil
	}
	return &guardedCatalog{Catalog: cat, warehouse: wh, props: props, st: st, log: log}, nil
}

// s3Configured reports whether any S3 setting was given explicitly or by
// the environment, so that REST catalogs (which may vend credentials) only
// resolve AWS credentials when the user configured some.
func s3Configured(c S3Config) bool {
	if c.Endpoint != "" || c.AccessKeyID != "" || c.Region != "" || c.PathStyle != nil {
		return true
	}
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

func openSQLite(ctx context.Context, name, spec string, props iceberg.Properties, extra map[string]string) (catalog.Catalog, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite://"), "file://"), "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open catalog %s: create its folder: %w", path, err)
	}
	// WAL and a busy timeout let several floe processes share one SQLite
	// catalog (iceberg-go #1793).
	props["uri"] = "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	props["type"] = "sql"
	props[sqlcat.DriverKey] = sqliteshim.ShimName
	props[sqlcat.DialectKey] = string(sqlcat.SQLite)
	maps.Copy(props, extra)
	// Switching a new file to WAL needs an exclusive lock that the busy
	// timeout does not wait for: processes opening one new catalog at the
	// same moment retry.
	var (
		cat catalog.Catalog
		err error
	)
	for attempt := 1; ; attempt++ {
		cat, err = catalog.Load(ctx, name, props)
		if err == nil || attempt == 10 || !strings.Contains(err.Error(), "SQLITE_BUSY") {
			break
		}
		if serr := sleep(ctx, time.Duration(attempt)*100*time.Millisecond); serr != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open SQLite catalog %s: %w", path, err)
	}
	return cat, nil
}

func openPostgres(ctx context.Context, name, spec string, props iceberg.Properties, extra map[string]string) (catalog.Catalog, error) {
	props["uri"] = spec
	props["type"] = "sql"
	props[sqlcat.DriverKey] = "pg" // bun's pgdriver, registered by its import
	props[sqlcat.DialectKey] = string(sqlcat.Postgres)
	maps.Copy(props, extra)
	// Processes starting together race to create the catalog's tables;
	// PostgreSQL reports the loser as a unique violation. Retry once.
	var (
		cat catalog.Catalog
		err error
	)
	for attempt := 0; attempt < 3; attempt++ {
		cat, err = catalog.Load(ctx, name, props)
		var pgErr pgdriver.Error
		if err == nil || !errors.As(err, &pgErr) || !pgErr.IntegrityViolation() {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL catalog %s: %w", redact(spec), explainCatalog(err))
	}
	return cat, nil
}

func openREST(ctx context.Context, name, spec string, cfg CatalogConfig, props iceberg.Properties) (catalog.Catalog, error) {
	props["uri"] = spec
	props["type"] = string(catalog.REST)
	if cfg.Token != "" {
		props["token"] = cfg.Token
	}
	if cfg.Credential != "" {
		if !strings.Contains(cfg.Credential, ":") {
			return nil, errors.New("REST catalog credential: want CLIENT_ID:CLIENT_SECRET")
		}
		props["credential"] = cfg.Credential
	}
	if cfg.OAuth2ServerURI != "" {
		props["oauth2-server-uri"] = cfg.OAuth2ServerURI
	}
	if cfg.Scope != "" {
		props["scope"] = cfg.Scope
	}
	maps.Copy(props, cfg.Props)
	cat, err := catalog.Load(ctx, name, props)
	if err != nil {
		return nil, fmt.Errorf("open REST catalog %s: %w", redact(spec), explainCatalog(err))
	}
	return cat, nil
}

func openGlue(st *s3Storage, props iceberg.Properties, extra map[string]string) (catalog.Catalog, error) {
	maps.Copy(props, extra)
	// The Glue client gets the whole resolved AWS configuration, so that
	// expiring credentials are refreshed. AWS_ENDPOINT_URL_GLUE and
	// glue.endpoint reach a Glue-compatible endpoint.
	cfg := st.cfg.Copy()
	if r := props[glue.Region]; r != "" {
		cfg.Region = r
	}
	if e := props[glue.Endpoint]; e != "" {
		cfg.BaseEndpoint = &e
	}
	cat, err := glue.NewCatalog(glue.WithAwsConfig(cfg), glue.WithAwsProperties(glue.AwsProperties(props)))
	if err != nil {
		return nil, fmt.Errorf("open Glue catalog: %w", err)
	}
	return cat, nil
}

// explainCatalog classifies a catalog error: nothing answering becomes
// ErrCatalogUnreachable, refused credentials ErrCatalogAuth.
func explainCatalog(err error) error {
	var pgErr pgdriver.Error
	switch {
	case isUnreachable(err):
		return fmt.Errorf("%w (check the address in --catalog and that the server runs): %w", ErrCatalogUnreachable, err)
	case errors.Is(err, rest.ErrUnauthorized), errors.Is(err, rest.ErrForbidden), errors.Is(err, rest.ErrOAuthError),
		errors.Is(err, rest.ErrAuthorizationExpired):
		return fmt.Errorf("%w (check --catalog-token or --catalog-credential): %w", ErrCatalogAuth, err)
	case errors.As(err, &pgErr) && (pgErr.Field('C') == "28P01" || pgErr.Field('C') == "28000"):
		return fmt.Errorf("%w (check the user and password in --catalog): %w", ErrCatalogAuth, err)
	}
	return err
}

// Explain adds what to fix to an error from storage or the catalog, when it
// can tell: a missing bucket, rejected credentials, an unreachable endpoint
// or catalog. Errors already classified, and others, are returned as they
// are.
func Explain(err error) error {
	if err == nil {
		return nil
	}
	for _, known := range []error{ErrBucketNotFound, ErrStorageCredentials, ErrStorageUnreachable,
		ErrCatalogUnreachable, ErrCatalogAuth, ErrOwnedByAnotherCatalog} {
		if errors.Is(err, known) {
			return err
		}
	}
	switch storageKind(err) {
	case ErrBucketNotFound:
		return fmt.Errorf("%w: the table's bucket is gone (check --warehouse and the table's location): %w", ErrBucketNotFound, err)
	case ErrStorageCredentials:
		return fmt.Errorf("%w: check the S3 credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or --s3-* flags): %w", ErrStorageCredentials, err)
	case ErrStorageUnreachable:
		return fmt.Errorf("%w: nothing committed is lost; restart the sink once the object store answers, it resumes from the ledger: %w", ErrStorageUnreachable, err)
	}
	return err
}

// guardedCatalog is a SQL or Glue catalog that refuses to create a table in
// a location another catalog already uses, and explains storage errors.
type guardedCatalog struct {
	catalog.Catalog
	warehouse string
	props     iceberg.Properties
	st        *s3Storage // nil: not on S3
	log       *slog.Logger
}

// CreateTable creates the table unless its default location already holds
// Iceberg metadata (then the table belongs to another catalog, or was
// dropped without purging, and two catalogs writing one location would
// corrupt it).
func (g *guardedCatalog) CreateTable(ctx context.Context, ident table.Identifier, sc *iceberg.Schema, opts ...catalog.CreateTableOpt) (*table.Table, error) {
	if _, err := g.Catalog.LoadTable(ctx, ident); err == nil {
		return nil, fmt.Errorf("create table %s: %w", strings.Join(ident, "."), catalog.ErrTableAlreadyExists)
	}
	if g.warehouse != "" {
		ns := strings.Join(catalog.NamespaceFromIdent(ident), ".")
		loc, err := url.JoinPath(g.warehouse, ns+".db", catalog.TableNameFromIdent(ident))
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

// LoadTable loads the table and explains storage errors.
func (g *guardedCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := g.Catalog.LoadTable(ctx, ident)
	return tbl, g.explain(err)
}

func (g *guardedCatalog) explain(err error) error {
	if err == nil {
		return nil
	}
	if g.st != nil && storageKind(err) != nil {
		bucket, _, _ := splitS3(g.warehouse)
		return g.st.explain(err, bucket)
	}
	return Explain(explainCatalog(err))
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
		return fmt.Errorf("%w: table %s is not in this catalog, but its location %s already holds Iceberg metadata (%s): "+
			"the table is probably registered in another catalog (another --catalog, or another --catalog-name: SQL catalogs only see tables of their own name), "+
			"or was dropped without purging its files. Point --catalog at the catalog that owns it, or sink into another table",
			ErrOwnedByAnotherCatalog, name, loc, found)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		// Some S3-compatible servers answer a listing of a missing prefix
		// with an error; creating the table reports real storage problems.
		g.log.Debug("cannot list a new table's location; assuming it is free", "location", loc, "err", err)
	}
	return nil
}

// warehouseURI turns a warehouse flag into a URI iceberg-go understands:
// plain paths become absolute file:// URIs.
func warehouseURI(w string) (string, error) {
	if w == "" {
		w = DefaultWarehouse
	}
	if strings.Contains(w, "://") {
		return strings.TrimSuffix(w, "/"), nil
	}
	abs, err := filepath.Abs(w)
	if err != nil {
		return "", fmt.Errorf("warehouse %s: %w", w, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("warehouse %s: create it: %w", abs, err)
	}
	return "file://" + abs, nil
}

// redact hides the password of a URI so errors and logs never show it.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// ParseIdent parses NAMESPACE.TABLE (the namespace may itself be dotted:
// a.b.table).
func ParseIdent(s string) (table.Identifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("table %q: want NAMESPACE.TABLE, for example lake.orders", s)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("table %q: empty name part; want NAMESPACE.TABLE, for example lake.orders", s)
		}
	}
	return parts, nil
}

// IsNoSuchTable reports whether err says the table does not exist.
func IsNoSuchTable(err error) bool {
	return errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace)
}
