package catalog

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	_ "github.com/apache/iceberg-go/catalog/rest" // registers the rest catalog type
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/driver/sqliteshim"
)

// Defaults of the zero-setup layout: everything under ./floe-data.
const (
	DefaultCatalog   = "floe-data/catalog.db"
	DefaultWarehouse = "floe-data/warehouse"
	// DefaultName is the name floe's SQL catalogs store in their
	// catalog_name column. Spark's and Trino's JDBC catalogs store theirs:
	// to share tables with them, use the same name.
	DefaultName = "floe"
)

// Kind is the kind of catalog a Config.Catalog names.
type Kind string

// Catalog kinds.
const (
	// SQLite is iceberg-go's SQL catalog in a SQLite file: a path,
	// sqlite:// or file: URI.
	SQLite Kind = "sqlite"
	// Postgres is iceberg-go's SQL catalog in PostgreSQL:
	// postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=...
	Postgres Kind = "postgres"
	// REST is an Iceberg REST catalog: http:// or https:// URI.
	REST Kind = "rest"
	// Glue is AWS Glue: the word glue.
	Glue Kind = "glue"
)

// KindOf returns the kind of catalog spec names (empty means SQLite).
func KindOf(spec string) (Kind, error) {
	lower := strings.ToLower(spec)
	switch {
	case lower == "glue":
		return Glue, nil
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return Postgres, nil
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		return REST, nil
	case keywordDSN(lower):
		// libpq's keyword form would be taken for a SQLite file's path: a
		// new catalog in a file named after the password.
		return "", errors.New("catalog: this looks like a PostgreSQL connection string in libpq's keyword form (host=... dbname=...); give it as a URL: postgres://USER:PASSWORD@HOST:PORT/DBNAME (the password percent-encoded), or FLOE_CATALOG to keep it off the command line")
	case strings.HasPrefix(lower, "sqlite://"), strings.HasPrefix(lower, "file:"), !strings.Contains(lower, "://"):
		return SQLite, nil
	}
	return "", fmt.Errorf("catalog %s: unsupported; want a SQLite file path, postgres://..., http(s)://... (REST) or glue", redact(spec))
}

// Config says where the catalog and the warehouse are and how to reach
// them.
type Config struct {
	// Catalog names the catalog; see KindOf. Empty means DefaultCatalog.
	Catalog string
	// Name is the catalog's name: SQL catalogs store it with every table
	// (Spark's and Trino's JDBC catalogs use their catalog name), Glue and
	// REST ignore it. Empty means DefaultName.
	Name string
	// Warehouse is where new tables are created. For SQLite, PostgreSQL and
	// Glue: a local path, file:// URI or s3://bucket/prefix URI; empty means
	// DefaultWarehouse (SQLite), or (PostgreSQL, Glue) that creating a table
	// is an error, while existing tables are written and read at their own
	// locations. For REST:
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
	// (S3 configuration, a new SQLite catalog, tolerated storage errors);
	// nil means slog.Default().
	Logger *slog.Logger
	// Existing opens a catalog that must already exist, for work on
	// existing tables (reading them, maintaining them), and creates
	// nothing: a SQLite file that does not exist is an error wrapping
	// ErrCatalogNotFound (no file, folder or warehouse folder is made, so a
	// mistyped path or a command run in the wrong folder is reported, not
	// answered from a new empty catalog), SQL catalogs do not create their
	// catalog tables (a PostgreSQL role with read grants only can read), and
	// no Warehouse is needed: tables are found at the locations their
	// metadata records, so an empty Warehouse is never defaulted or
	// required, and an s3:// one whose bucket does not exist is logged,
	// not an error. Without it, Open creates a missing SQLite catalog (and logs
	// that it does) and the default warehouse folder.
	Existing bool
	// CreateOnRegister (without Existing) has Open create nothing: a
	// SQLite catalog file that does not exist is created by Register once
	// a registration has passed its checks, so that a refused one leaves
	// no new catalog behind (floe register's refusals left an empty file,
	// which later commands read as an empty catalog instead of saying it
	// is missing), and no warehouse folder is made (registering needs
	// none). Until Register creates it,
	// such a catalog is for LatestMetadata and Register only: it has no
	// connection, and its other methods must not be called.
	CreateOnRegister bool
}

// ErrCatalogNotFound is wrapped by Open's error when Config.Existing names a
// SQLite catalog file that does not exist.
var ErrCatalogNotFound = errors.New("catalog not found")

// ErrCatalogFileReplaced is matched (errors.Is) by a write to a SQLite
// catalog whose file was deleted or replaced since the catalog was opened:
// the connection still writes the old file, which no other process reads,
// so its commits would fork the tables' metadata from a catalog made anew
// at that path. It is not transient: the process stops.
var ErrCatalogFileReplaced = errors.New("the SQLite catalog file was deleted or replaced since floe opened it")

// Open opens the catalog, on first use initialising a SQL catalog's
// tables. For s3:// warehouses it resolves S3 access from the AWS standard
// configuration and checks that the bucket answers, so that a missing
// bucket, rejected credentials or an unreachable endpoint are reported at
// start with what to fix (errors wrapping ErrBucketNotFound,
// ErrStorageCredentials, ErrStorageUnreachable). A catalog that does not
// answer or rejects its credentials is an error wrapping
// ErrCatalogUnreachable or ErrCatalogAuth.
//
// The SQL and Glue catalogs it returns classify every error they return
// the same way, attributing a failure to the object store or to the
// catalog by where it came from; and they refuse to create a table (with
// an error wrapping ErrOwnedByAnotherCatalog) when its location already
// holds Iceberg metadata this catalog does not know. All S3 I/O of their
// tables (data, manifest and metadata files, listings, deletions) goes
// through one S3 configuration and HTTP client resolved here, however
// often iceberg-go opens the storage; tables committed through them and
// tables rebuilt from them with their FS and catalog keep it. The tables
// of a REST catalog use that configuration as their base too (the S3
// settings given to floe, else the AWS standard configuration), under the
// s3.* properties the server gives them (see restCatalog).
func Open(ctx context.Context, cfg Config) (icecat.Catalog, error) {
	spec := cfg.Catalog
	if spec == "" {
		spec = DefaultCatalog
	}
	kind, err := KindOf(spec)
	if err != nil {
		return nil, err
	}
	if kind == Postgres || kind == REST {
		// A password that is not percent-encoded either fails to parse,
		// and the driver's parse error quotes the URI whole, or parses as
		// the port of a host named like the user ("floe:2024/x@host"),
		// whose errors quote it too (found by review).
		if u, err := url.Parse(spec); err != nil || u.User == nil && redact(spec) != spec {
			return nil, &ConfigError{Setting: SettingCatalog, Value: redact(spec),
				Want: "a URL: percent-encode what the user name or password holds (% as %25, # as %23, @ as %40, / as %2F, ? as %3F)"}
		}
	}
	name := cfg.Name
	if name == "" {
		name = DefaultName
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	props := iceberg.Properties{}
	if cfg.Existing && kind != REST && kind != Glue {
		// iceberg-go's SQL catalog creates its tables when they are
		// missing unless told not to; Props may still override it.
		props["init_catalog_tables"] = "false"
	}
	wh := cfg.Warehouse
	// A PostgreSQL or Glue catalog has no default warehouse: without one
	// only creating a table fails (guardedCatalog.CreateTable), so a sink
	// or replay into existing tables needs none, as the commands that
	// read them do (a new user's replay onto a branch was refused).
	if kind != REST && (wh != "" || !cfg.Existing && kind == SQLite) {
		if wh, err = warehouseURI(wh, !cfg.Existing && !cfg.CreateOnRegister); err != nil {
			return nil, err
		}
	}
	if wh != "" {
		props["warehouse"] = wh
	}
	// S3 access: for an s3:// warehouse, for Glue, whose tables live on S3
	// whatever the warehouse property says, and for tables on S3 of a
	// catalog whose warehouse is elsewhere when S3 is configured (REST
	// catalogs may vend credentials, so only then).
	var st *s3Storage
	bucket, prefix, onS3 := splitS3(wh)
	switch {
	case onS3 || kind == Glue || s3Configured(cfg.S3, kind == REST || wh == ""):
		if st, err = resolveS3(ctx, cfg.S3, log); err != nil {
			return nil, err
		}
		maps.Copy(props, st.props)
	case kind == REST:
		// No S3 setting of floe's: the server's properties (from its
		// config and each table's load) configure S3 access, over the
		// standard configuration, as iceberg-go does on its own; floe's
		// base only adds its HTTP client and withoutResponseIDs. One that
		// does not load is left to iceberg-go.
		if st, err = baseS3(ctx, log); err != nil {
			log.Debug("S3 access left to iceberg-go: the AWS configuration does not load", "err", err)
			st = nil
		}
	case os.Getenv("AWS_ENDPOINT_URL_S3") != "" || os.Getenv("AWS_ENDPOINT_URL") != "":
		// A folder warehouse with an S3 endpoint in the AWS environment:
		// tables on S3 read through floe's configuration all the same, so
		// that a server that is down reads as unreachable, not as a
		// missing file (withoutResponseIDs). Only then: resolving runs the
		// credential chain (an AWS_PROFILE's credential_process, an SSO
		// call) for every command of a catalog of local tables (from a
		// review). An AWS setup that does not resolve is left to
		// iceberg-go, as before: a file warehouse never fails on it.
		if st, err = resolveS3(ctx, cfg.S3, log); err != nil {
			log.Debug("S3 access left to iceberg-go: the AWS environment does not resolve", "err", err)
			st = nil
		} else {
			maps.Copy(props, st.props)
		}
	}
	bucketMissing := false
	if onS3 {
		err := st.check(ctx, bucket, prefix)
		switch {
		case err != nil && cfg.Existing && errors.Is(err, ErrBucketNotFound):
			bucketMissing = true
			// Work on existing tables reads them where their metadata
			// says, whatever the warehouse for new tables: a config
			// file's warehouse that is not at this endpoint stopped an
			// audit of a table on another bucket (from a new user's run).
			log.Warn("the warehouse's bucket does not exist; going on, since existing tables are read where their metadata says", "warehouse", wh, "err", err)
		case err != nil:
			return nil, fmt.Errorf("warehouse %s: %w", wh, err)
		}
	}

	var (
		cat  icecat.Catalog
		file *catalogFile
	)
	switch kind {
	case SQLite:
		cat, file, err = openSQLite(ctx, name, spec, cfg.Existing, cfg.CreateOnRegister, log, props, cfg.Props)
	case Postgres:
		cat, err = openPostgres(ctx, name, spec, props, cfg.Props)
	case REST:
		cat, err = openREST(ctx, name, spec, cfg, props)
	case Glue:
		cat, err = openGlue(st, props, cfg.Props)
	}
	if err != nil {
		return nil, err
	}
	if kind == REST {
		// The server chooses table locations and guards them: only the
		// tables' storage is floe's to configure.
		if st == nil || !sharesConfig(props) {
			return cat, nil
		}
		return &restCatalog{Catalog: cat, st: st}, nil
	}
	g := &guardedCatalog{Catalog: cat, spec: redact(spec), name: name, warehouse: wh, bucket: bucket, bucketMissing: bucketMissing, props: props, st: st, log: log, file: file}
	if kind == SQLite && cat == nil {
		// CreateOnRegister, and no file yet.
		g.create = func(ctx context.Context) (icecat.Catalog, *catalogFile, error) {
			return openSQLite(ctx, name, spec, false, false, log, props, cfg.Props)
		}
	}
	if st != nil {
		// props now hold cfg.Props too.
		g.shareS3 = sharesConfig(props)
		if !g.shareS3 {
			log.Debug("S3 access is configured by iceberg-go for each storage opening (--catalog-prop sets s3.proxy-uri, s3.connect-timeout or s3.remote-signing-enabled)")
		}
	}
	return g, nil
}

// s3Configured reports whether S3 access should be resolved for a catalog
// whose warehouse is not on S3. Settings given explicitly (flags) always
// count: without them resolved, they would be ignored. The AWS environment
// counts only where floe cannot tell where the tables are (envCounts): for
// REST catalogs (which may vend credentials instead), and for catalogs
// opened without a warehouse (Config.Existing), whose tables may be on an
// S3-compatible server that needs floe's path-style and endpoint
// properties. Where the warehouse is a folder, Open resolves the
// environment for SQL catalogs' tables on S3 only where it can, so a file
// warehouse never fails on an unrelated AWS setup.
func s3Configured(c S3Config, envCounts bool) bool {
	if c.Endpoint != "" || c.AccessKeyID != "" || c.Region != "" || c.PathStyle != nil {
		return true
	}
	if !envCounts {
		return false
	}
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// openSQLite opens the SQLite catalog file spec names. A file that does
// not exist is created, and the log says so (a mistyped path would
// otherwise be a new, empty catalog without a word), unless existing: then
// it is an error naming the absolute path looked at, and nothing is made;
// or later: then nothing is made or opened, and the catalog is nil (see
// Config.CreateOnRegister). It returns the file it opened too, which
// writes check (catalogFile).
func openSQLite(ctx context.Context, name, spec string, existing, later bool, log *slog.Logger, props iceberg.Properties, extra map[string]string) (icecat.Catalog, *catalogFile, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(spec, "sqlite://"), "file://"), "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open SQLite catalog %s: %w", path, err)
	}
	switch fi, err := os.Stat(abs); {
	case err == nil && !fi.Mode().IsRegular():
		return nil, nil, fmt.Errorf("open SQLite catalog %s: not a file", abs)
	case err == nil:
	case !errors.Is(err, fs.ErrNotExist):
		return nil, nil, fmt.Errorf("open SQLite catalog %s: %w", abs, err)
	case existing:
		return nil, nil, fmt.Errorf("%w: SQLite catalog %s does not exist", ErrCatalogNotFound, abs)
	case later:
		return nil, nil, nil
	default:
		log.Info("creating a new SQLite catalog", "path", abs)
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, nil, fmt.Errorf("create SQLite catalog %s: create its folder: %w", abs, err)
		}
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
	var cat icecat.Catalog
retry:
	for attempt := 1; ; attempt++ {
		cat, err = icecat.Load(ctx, name, props)
		if err == nil || attempt == 10 || !sqliteBusy(err) {
			break
		}
		pause := time.NewTimer(time.Duration(attempt) * 100 * time.Millisecond)
		select {
		case <-ctx.Done():
			pause.Stop()
			break retry
		case <-pause.C:
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open SQLite catalog %s: %w", path, err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("open SQLite catalog %s: %w", abs, err)
	}
	return cat, &catalogFile{path: abs, info: info}, nil
}

// catalogFile is the SQLite file a catalog opened: its path, and the
// file found there when it was opened.
type catalogFile struct {
	path string
	info os.FileInfo
}

// check returns an error matching ErrCatalogFileReplaced when the path no
// longer names the file opened (deleted, or another file put there), nil
// otherwise (f nil: not a SQLite catalog). A catalog lost while sinks ran
// (a disk's file deleted) and registered anew at its path got the running
// sink's commits in the deleted file, unseen, beside the new catalog's:
// two metadata files of each version (found by a user).
func (f *catalogFile) check() error {
	if f == nil {
		return nil
	}
	now, err := os.Stat(f.path)
	switch {
	case err == nil && os.SameFile(f.info, now):
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		// Unreadable for another reason: the write says what is wrong.
		return nil
	}
	what := "deleted"
	if err == nil {
		what = "replaced by another file"
	}
	return fmt.Errorf("%w: %s was %s, so this process's writes would go to the old file, which no other process reads, forking the tables' metadata from the catalog now at that path: stop this process; if the catalog was lost, put its tables back with floe register (docs/deployment.md, recovery) and start again",
		ErrCatalogFileReplaced, f.path, what)
}

func openPostgres(ctx context.Context, name, spec string, props iceberg.Properties, extra map[string]string) (icecat.Catalog, error) {
	props["uri"] = spec
	props["type"] = "sql"
	props[sqlcat.DriverKey] = pgDriverName // bun's pgdriver, its pooled connections checked before reuse
	props[sqlcat.DialectKey] = string(sqlcat.Postgres)
	maps.Copy(props, extra)
	_, initSet := props["init_catalog_tables"] // by Config.Existing or the caller
	// Processes starting together race to create the catalog's tables:
	// CREATE TABLE IF NOT EXISTS is not safe against a concurrent one, and
	// PostgreSQL reports the loser as a unique violation (on pg_type) or,
	// when the other's table type is already committed, as
	// duplicate_object (42710) or duplicate_table (42P07). Retry.
	var (
		cat icecat.Catalog
		err error
	)
	for attempt := 0; attempt < 3; attempt++ {
		cat, err = icecat.Load(ctx, name, props)
		var pgErr pgdriver.Error
		if err == nil || !errors.As(err, &pgErr) {
			break
		}
		if code := pgErr.Field('C'); !pgErr.IntegrityViolation() && code != "42710" && code != "42P07" {
			break
		}
	}
	var pgErr pgdriver.Error
	if err != nil && !initSet && errors.As(err, &pgErr) && pgErr.Field('C') == "42501" {
		// iceberg-go's CREATE TABLE IF NOT EXISTS needs CREATE on the
		// schema even where the tables exist: a least-privilege role
		// (SELECT, INSERT, UPDATE, DELETE on them) opens without creating
		// them once both exist (from a production user). Where they do
		// not, the refusal stands, with its hint.
		if exist, qerr := pgCatalogTablesExist(ctx, spec); qerr == nil && exist {
			props["init_catalog_tables"] = "false"
			cat, err = icecat.Load(ctx, name, props)
		}
	}
	if err != nil {
		if nerr := notPostgres(redact(spec), err); nerr != nil {
			return nil, nerr
		}
		return nil, fmt.Errorf("open PostgreSQL catalog %s: %w", redact(spec), explainCatalog(err))
	}
	return cat, nil
}

// notPostgres classifies err, a PostgreSQL catalog's failure, when it says
// that what takes connections at spec's address does not talk PostgreSQL:
// no answer within the driver's read timeout, an ErrCatalogUnreachable as
// a REST catalog that never answers is (a Kafka port reads the startup
// message as the start of a request and waits for the rest, an HTTP
// server for the end of a request line), or an answer of another
// protocol (a server that greets first, as SMTP does). It returns nil
// for any other error. Unclassified, they said "i/o timeout" after 10 s
// or "unexpected startup message", and nothing of the URL.
func notPostgres(spec string, err error) error {
	switch {
	case isTimeout(err):
		return check(fmt.Errorf("%w: PostgreSQL catalog %s: no answer within the driver's read timeout (10s unless the URL sets read_timeout or timeout): is a PostgreSQL server listening at that address? A Kafka port, or another server that is not PostgreSQL, takes the connection and never answers: %w",
			ErrCatalogUnreachable, spec, err), SettingCatalog)
	case strings.Contains(err.Error(), "unexpected startup message"):
		return check(fmt.Errorf("PostgreSQL catalog %s: the server there does not answer as PostgreSQL (its answer to the connection's startup message is another protocol's): check the host and port in the catalog's URL: %w",
			spec, err), SettingCatalog)
	}
	return nil
}

// pgCatalogTablesExist reports whether both tables of iceberg-go's SQL
// catalog exist where the connection spec names finds them (its search
// path), as iceberg-go's unqualified names do.
func pgCatalogTablesExist(ctx context.Context, spec string) (bool, error) {
	db, err := sql.Open(pgDriverName, spec)
	if err != nil {
		return false, fmt.Errorf("look for the catalog's tables: %w", err)
	}
	defer db.Close()
	var exist bool
	err = db.QueryRowContext(ctx, "SELECT to_regclass('iceberg_tables') IS NOT NULL AND to_regclass('iceberg_namespace_properties') IS NOT NULL").Scan(&exist)
	if err != nil {
		return false, fmt.Errorf("look for the catalog's tables: %w", err)
	}
	return exist, nil
}

func openREST(ctx context.Context, name, spec string, cfg Config, props iceberg.Properties) (icecat.Catalog, error) {
	props["uri"] = spec
	props["type"] = string(icecat.REST)
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
	return loadREST(ctx, name, spec, props, restOpenTimeout)
}

// restOpenTimeout bounds opening a REST catalog: its GET /v1/config.
// iceberg-go's REST client has no timeout of its own, and a server that
// takes the connection and never answers (a Kafka port given as the
// catalog's URL) held every command forever (a new user's run).
const restOpenTimeout = 20 * time.Second

// loadREST opens the REST catalog at spec with props, giving up when it
// has not answered within timeout.
func loadREST(ctx context.Context, name, spec string, props iceberg.Properties, timeout time.Duration) (icecat.Catalog, error) {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cat, err := icecat.Load(lctx, name, props)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, check(fmt.Errorf("%w: open REST catalog %s: no answer to GET %s/v1/config within %s (is an Iceberg REST catalog serving there? a Kafka port, or another server that is not HTTP, takes the connection and never answers): %w",
				ErrCatalogUnreachable, redact(spec), strings.TrimSuffix(redact(spec), "/"), timeout, err), SettingCatalog)
		}
		if notRESTAnswer(err) {
			return nil, check(fmt.Errorf("open REST catalog %s: the server there does not answer as an Iceberg REST catalog (its answer to GET %s/v1/config is not the JSON a catalog gives): is --catalog the catalog's base URL, the part before /v1?: %w",
				redact(spec), strings.TrimSuffix(redact(spec), "/"), err), SettingCatalog)
		}
		return nil, fmt.Errorf("open REST catalog %s: %w", redact(spec), explainCatalog(err))
	}
	return cat, nil
}

// notRESTAnswer reports whether err is iceberg-go's failure to read a REST
// catalog's answer as JSON: the server at the catalog's URL is something
// else (a schema registry, an S3 endpoint, a web page; a new user's run
// read "failed to decode error response: json: cannot unmarshal number
// into Go value of type struct { Error *rest.errorResponse ... }").
func notRESTAnswer(err error) bool {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	msg := err.Error()
	return errors.As(err, &syntax) || errors.As(err, &typ) ||
		strings.Contains(msg, "failed to decode error response") || strings.Contains(msg, "error decoding json payload")
}

// glueRequestTimeout bounds each request of a Glue catalog (the SDK tries
// three times): iceberg-go's Glue calls take no deadline, and an endpoint
// that takes the connection and never answers held every command forever
// (a new user's run on a wrong AWS_ENDPOINT_URL_GLUE).
const glueRequestTimeout = 30 * time.Second

func openGlue(st *s3Storage, props iceberg.Properties, extra map[string]string) (icecat.Catalog, error) {
	return openGlueTimeout(st, props, extra, glueRequestTimeout)
}

// openGlueTimeout is openGlue with each request bounded by timeout.
func openGlueTimeout(st *s3Storage, props iceberg.Properties, extra map[string]string, timeout time.Duration) (icecat.Catalog, error) {
	maps.Copy(props, extra)
	// The Glue client gets the whole resolved AWS configuration, so that
	// expiring credentials are refreshed. AWS_ENDPOINT_URL_GLUE and
	// glue.endpoint reach a Glue-compatible endpoint.
	cfg := st.cfg.Copy()
	switch hc := cfg.HTTPClient.(type) {
	case *http.Client:
		c := *hc
		c.Timeout = timeout
		cfg.HTTPClient = &c
	case *awshttp.BuildableClient:
		cfg.HTTPClient = hc.WithTimeout(timeout)
	case nil:
		cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(timeout)
	}
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

// warehouseURI turns a warehouse flag into a URI iceberg-go understands:
// plain paths become absolute file:// URIs, whose folder is created when
// create is set.
func warehouseURI(w string, create bool) (string, error) {
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
	if create {
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return "", fmt.Errorf("warehouse %s: create it: %w", abs, err)
		}
	}
	return "file://" + abs, nil
}

// Redact hides the password of a catalog URI, for what floe prints.
func Redact(s string) string { return redact(s) }

// keywordDSN reports whether spec (lower case) reads as libpq's keyword
// form: space-separated KEY=VALUE pairs, at least two of them naming a
// host, database, user or password (a file path such as user=alice/c.db
// is one field).
func keywordDSN(spec string) bool {
	if strings.Contains(spec, "://") || !strings.Contains(spec, "=") {
		return false
	}
	n := 0
	for f := range strings.FieldsSeq(spec) {
		k, _, ok := strings.Cut(f, "=")
		if ok && (k == "host" || k == "hostaddr" || k == "dbname" || k == "password" || k == "user" || k == "port" || k == "sslmode") {
			n++
		}
	}
	return n >= 2
}

// redact hides the password of a URI so errors and logs never show it:
// everything between the user name and the last @ after the scheme, read
// from the text, not from a parse. A password that is not percent-encoded
// may not parse at all, or parse as a port ("floe:2024/Summer@host" is
// host floe, port 2024), and the parse then has no password to hide
// (found by review). Hiding up to the last @ may hide more than the
// password, never less.
func redact(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	at := strings.LastIndex(rest, "@")
	if !ok || at < 0 {
		return s
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return s
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}

// ParseIdent parses a table name as catalogs address tables,
// NAMESPACE.TABLE (the namespace may itself be dotted: a.b.table). It
// lives here, beside the catalog it names a table of, because every
// catalog kind floe opens resolves tables by namespace and name; package
// snapshot only ever receives the parsed identifier.
//
// A name part that no catalog can hold is refused here, as invalid, rather
// than reported later as a table that does not exist: a "/" (iceberg-go
// refuses it: locations are paths), a control character, or spaces around
// a part (a quoting mistake far more often than a name).
func ParseIdent(s string) (table.Identifier, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, fmt.Errorf("table %q: want NAMESPACE.TABLE, for example lake.orders", s)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("table %q: empty name part; want NAMESPACE.TABLE, for example lake.orders", s)
		}
		if why := invalidPart(p); why != "" {
			return nil, fmt.Errorf("table %q: invalid name part %q: %s", s, p, why)
		}
	}
	return parts, nil
}

// invalidPart says why a part of a table name cannot be used, or "".
func invalidPart(p string) string {
	switch {
	case strings.Contains(p, "/"):
		return `it holds a "/"`
	case strings.TrimSpace(p) != p:
		return "it begins or ends with a space"
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "it holds a control character"
	}
	return ""
}
