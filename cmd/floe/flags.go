package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// catalogFlags say where the catalog and the warehouse are and how to reach
// them: the catalog, the warehouse, REST authentication and S3 access.
type catalogFlags struct {
	catalog     string
	catalogName string
	warehouse   string
	props       []string
	token       string
	credential  string
	oauth2URI   string
	scope       string

	s3Endpoint  string
	s3Region    string
	s3KeyID     string
	s3Secret    string
	s3Token     string
	s3PathStyle bool

	fs *pflag.FlagSet // to tell whether --s3-path-style was given
}

func (f *catalogFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.catalog, "catalog", catalog.DefaultCatalog,
		"catalog: a SQLite file path, postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=..., an Iceberg REST catalog http(s)://HOST/PATH, or glue")
	fs.StringVar(&f.catalogName, "catalog-name", catalog.DefaultName,
		"catalog name stored by SQL catalogs with each table; use your Spark or Trino JDBC catalog's name to share its tables")
	fs.StringVar(&f.warehouse, "warehouse", "",
		"where floe sink and floe replay create new tables: a path, file:// or s3://BUCKET/PREFIX (default "+catalog.DefaultWarehouse+" with the SQLite catalog); only creating a table needs it: existing tables are found at their own locations; for a REST catalog, the warehouse name it expects")
	fs.StringArrayVar(&f.props, "catalog-prop", nil, "extra iceberg-go catalog property `KEY=VALUE`, repeatable; overrides what floe derives")
	fs.StringVar(&f.token, "catalog-token", "", "REST catalog bearer token (prefer the FLOE_CATALOG_TOKEN variable)")
	fs.StringVar(&f.credential, "catalog-credential", "", "REST catalog OAuth2 client credentials CLIENT_ID:CLIENT_SECRET (prefer FLOE_CATALOG_CREDENTIAL)")
	fs.StringVar(&f.oauth2URI, "catalog-oauth2-uri", "", "REST catalog OAuth2 token endpoint (default: the catalog's /v1/oauth/tokens)")
	fs.StringVar(&f.scope, "catalog-scope", "", "REST catalog OAuth2 scope (default: catalog)")
	fs.StringVar(&f.s3Endpoint, "s3-endpoint", "", "S3-compatible endpoint URL, e.g. http://minio:9000 (default: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS)")
	fs.StringVar(&f.s3Region, "s3-region", "", "S3 region (default: AWS_REGION or the shared config; us-east-1 with a custom endpoint)")
	fs.StringVar(&f.s3KeyID, "s3-access-key-id", "", "S3 access key id (default: the AWS credential chain: AWS_ACCESS_KEY_ID, AWS_PROFILE, roles)")
	fs.StringVar(&f.s3Secret, "s3-secret-access-key", "", "S3 secret access key (prefer AWS_SECRET_ACCESS_KEY or FLOE_S3_SECRET_ACCESS_KEY)")
	fs.StringVar(&f.s3Token, "s3-session-token", "", "S3 session token for temporary static credentials")
	fs.BoolVar(&f.s3PathStyle, "s3-path-style", false, "force path-style S3 addressing (on by default with a custom endpoint; --s3-path-style=false forces virtual-hosted style)")
}

// config turns the flags into a catalog.Config.
func (f *catalogFlags) config() (catalog.Config, error) {
	cfg := catalog.Config{
		Catalog:         f.catalog,
		Name:            f.catalogName,
		Warehouse:       f.warehouse,
		Token:           f.token,
		Credential:      f.credential,
		OAuth2ServerURI: f.oauth2URI,
		Scope:           f.scope,
		S3: catalog.S3Config{
			Endpoint:        f.s3Endpoint,
			Region:          f.s3Region,
			AccessKeyID:     f.s3KeyID,
			SecretAccessKey: f.s3Secret,
			SessionToken:    f.s3Token,
		},
	}
	if f.fs != nil && f.fs.Changed("s3-path-style") {
		ps := f.s3PathStyle
		cfg.S3.PathStyle = &ps
	}
	for _, kv := range f.props {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return cfg, fmt.Errorf("--catalog-prop %q: want KEY=VALUE", kv)
		}
		if cfg.Props == nil {
			cfg.Props = map[string]string{}
		}
		cfg.Props[k] = v
	}
	return cfg, nil
}

// openCatalog opens the catalog the flags name.
func (f *catalogFlags) openCatalog(ctx context.Context) (icecat.Catalog, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	return catalog.Open(ctx, cfg)
}

// openExisting opens the catalog, which must exist: nothing is created
// (see tableFlags.open).
func (f *catalogFlags) openExisting(ctx context.Context) (icecat.Catalog, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	cfg.Existing = true
	cat, err := catalog.Open(ctx, cfg)
	if errors.Is(err, catalog.ErrCatalogNotFound) {
		return nil, fmt.Errorf("%w (--catalog names an existing catalog; floe sink creates one)", err)
	}
	return cat, err
}

// tableFlags are the flags that name a table and where it lives.
type tableFlags struct {
	table string
	catalogFlags
}

func (f *tableFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.table, "table", "", "Iceberg table as `NAMESPACE.TABLE` (required)")
	f.catalogFlags.register(fs)
}

// open opens the catalog and the table. Unless opts.Create makes a missing
// table, the catalog must exist and nothing is created (not even the
// default ./floe-data/), so that a command run in the wrong folder or with
// a mistyped --catalog says where it looked instead of answering from a
// new, empty catalog; and no --warehouse is needed.
func (f *tableFlags) open(ctx context.Context, opts snapshot.OpenOptions) (*snapshot.Table, error) {
	cat, ident, err := f.tableCatalog(ctx, opts.Create)
	if err != nil {
		return nil, err
	}
	tbl, err := snapshot.Open(ctx, cat, ident, opts)
	return tbl, f.notFound(ctx, cat, err)
}

// notFound is err, the error of opening --table in cat, with what may
// have been meant when the table does not exist: every command that names
// a table says it the same way (floe drop said nothing of the table a
// misspelt --table meant, where floe audit did).
func (f *tableFlags) notFound(ctx context.Context, cat icecat.Catalog, err error) error {
	if !errors.Is(err, snapshot.ErrTableNotFound) {
		return err
	}
	// A mistyped name got no suggestion, where a flag does (from a
	// new-user run).
	if near := nearTables(ctx, cat, f.table); len(near) > 0 {
		err = fmt.Errorf("%w (did you mean %s?)", err, strings.Join(near, " or "))
	}
	// A SQL catalog sees only the tables stored under its name: a
	// --catalog-name copied from a Spark or Trino setup hides floe's
	// tables, and the error named only --table and --catalog (from a
	// new-user run).
	if kind, kerr := catalog.KindOf(f.catalog); kerr == nil && (kind == catalog.SQLite || kind == catalog.Postgres) && f.catalogName != catalog.DefaultName {
		err = fmt.Errorf("%w (looked under --catalog-name %q: a SQL catalog sees only the tables stored under its catalog name, %q unless --catalog-name says otherwise)",
			err, f.catalogName, catalog.DefaultName)
	}
	return err
}

// nearTables are the tables of cat whose names are close to name
// (closeTo): those a misspelt --table meant. A catalog that cannot list
// its tables has none to offer.
func nearTables(ctx context.Context, cat icecat.Catalog, name string) []string {
	var names []string
	for other, err := range snapshot.Tables(ctx, cat) {
		if err != nil {
			break
		}
		names = append(names, strings.Join(other, "."))
	}
	return closeTo(name, names)
}

// tableCatalog opens the catalog of --table, which must exist unless
// create, and returns it with the table's identifier.
func (f *tableFlags) tableCatalog(ctx context.Context, create bool) (icecat.Catalog, table.Identifier, error) {
	if f.table == "" {
		return nil, nil, errMissingTable(ctx)
	}
	ident, err := catalog.ParseIdent(f.table)
	if err != nil {
		return nil, nil, err
	}
	open := f.openExisting
	if create {
		open = f.openCatalog
	}
	cat, err := open(ctx)
	if err != nil {
		return nil, nil, err
	}
	return cat, ident, nil
}

// errMissingTable is the error of a command that reads one table and got
// no --table. A config file's pipelines name tables, but only floe sink
// takes them: the error lists them (a new user ran floe audit --config
// with the sink's file and was told only to give --table).
func errMissingTable(ctx context.Context) error {
	c := configFrom(ctx)
	if c == nil || len(c.pipelines) == 0 {
		return errors.New("missing --table NAMESPACE.TABLE")
	}
	var tables []string
	for _, p := range c.pipelines {
		if !slices.Contains(tables, p.Table) {
			tables = append(tables, p.Table)
		}
	}
	if len(tables) == 1 {
		return fmt.Errorf("missing --table NAMESPACE.TABLE: the pipelines of config file %s are floe sink's (table %s); this command takes --table: pass --table %s",
			c.path, tables[0], tables[0])
	}
	return fmt.Errorf("missing --table NAMESPACE.TABLE: the pipelines of config file %s are floe sink's, of several tables (%s); this command takes one --table: pass --table %s, or another of them",
		c.path, strings.Join(tables, ", "), tables[0])
}

// brokerFlags say how to reach the Kafka brokers: -b like kcat, and how
// to secure the connection (kafkasec.go).
type brokerFlags struct {
	brokers        []string
	dialTimeout    time.Duration
	requestTimeout time.Duration
	kafkaSecurityFlags
}

// minRequestTimeout is the least --request-timeout franz-go takes.
const minRequestTimeout = 100 * time.Millisecond

// register adds --brokers (-b) with usage, --dial-timeout,
// --request-timeout and the Kafka security flags.
func (f *brokerFlags) register(fs *pflag.FlagSet, usage string) {
	fs.StringSliceVarP(&f.brokers, "brokers", "b", nil, "Kafka bootstrap brokers `HOST:PORT[,HOST:PORT]`"+usage)
	fs.DurationVar(&f.dialTimeout, "dial-timeout", connector.DefaultDialTimeout, "at start, how long to wait for the brokers to take connections (a broker starting beside floe) and answer; 0 or less means the default")
	fs.DurationVar(&f.requestTimeout, "request-timeout", connector.DefaultRequestTimeout, "how long a request to a broker may go unanswered (beyond the wait a fetch asks for) before it is tried again on a new connection; a broker that lets one pass counts as not answering, which a sink's /readyz reports; 0 or less means the default")
	f.kafkaSecurityFlags.register(fs)
}

// errNoBrokers is the error of a command that needs brokers and got none.
var errNoBrokers = errors.New("missing --brokers HOST:PORT[,HOST:PORT] (or FLOE_BROKERS; a local stack's env.sh sets it: . ./floe-local/env.sh)")

// dial connects to the brokers when they were given; nil otherwise.
func (f *brokerFlags) dial(ctx context.Context) (*connector.Broker, error) {
	if len(f.brokers) == 0 {
		return nil, nil
	}
	sec, err := f.security(ctx)
	if err != nil {
		return nil, settingsError{err}
	}
	timeout := f.requestTimeout
	if timeout <= 0 {
		timeout = connector.DefaultRequestTimeout
	}
	if timeout < minRequestTimeout {
		return nil, settingsError{fmt.Errorf("--request-timeout %s: want at least %s", f.requestTimeout, minRequestTimeout)}
	}
	return connector.DialSecure(ctx, f.brokers, f.dialTimeout, sec, kgo.RequestTimeoutOverhead(timeout))
}

// settingsError is a Kafka security setting (a --kafka-config file that
// cannot be read or does not fit) that cannot work: a usage error, not
// brokers that failed.
type settingsError struct{ error }

func (e settingsError) Unwrap() error { return e.error }

// dialOptional is dial for a command that answers without the brokers
// too (audit, where, as-of): a failure says how to do without them, where
// FLOE_BROKERS names brokers that are down. A lookup (where, as-of), for
// which the brokers only add detail, answers from the table alone, with a
// warning, when the brokers a FLOE_* variable or the config file named
// fail: a local stack's env.sh left pointing at a stopped broker blocked
// every lookup (from a new user). Brokers given on the command line were
// asked for, and the audit's broker level is part of what it proves: those
// failures stay errors. So does a refusal (TLS, SASL), which names the
// setting to fix: brokers that answer at once are not out of reach (a
// wrong password answered from the table alone, from a new user's run).
func (f *brokerFlags) dialOptional(ctx context.Context, lookup bool) (*connector.Broker, error) {
	b, err := f.dial(ctx)
	if err == nil {
		return b, nil
	}
	src := sourcesOf(ctx)
	var settings settingsError
	var config *connector.ConfigError
	check, checked := errors.AsType[*connector.CheckError](err)
	refused := checked && !slices.Contains(check.Settings, connector.SettingBrokers)
	if lookup && src["brokers"] != "" && ctx.Err() == nil && !refused && !errors.As(err, &settings) && !errors.As(err, &config) {
		slog.Warn(fmt.Sprintf("answering from the table alone: the brokers --brokers names (set by %s) failed, and this lookup needs them only for detail; "+
			"pass --brokers '' to leave them out without waiting --dial-timeout", src["brokers"]), "err", err)
		return nil, nil
	}
	return nil, fmt.Errorf("%w (without the brokers, --brokers '' answers from the table alone)", err)
}

// topicFlag adds --topic (-t, like kcat) with usage.
func topicFlag(fs *pflag.FlagSet, topic *string, usage string) {
	fs.StringVarP(topic, "topic", "t", "", usage)
}

// restOnlyFlags are the catalog flags only an Iceberg REST catalog reads.
var restOnlyFlags = []string{"catalog-token", "catalog-credential", "catalog-oauth2-uri", "catalog-scope"}

// restFlagsIgnored warns of each REST-only catalog flag given a value
// while --catalog names another kind of catalog, which ignores it: a
// --catalog-token beside a PostgreSQL catalog was dropped without a word
// (deploy review s67), and a user who meant a REST catalog's URL never
// learnt it was not used. src says where each flag's value came from when
// not from the command line.
func restFlagsIgnored(fs *pflag.FlagSet, src flagSources) []string {
	cf := fs.Lookup("catalog")
	if cf == nil {
		return nil
	}
	kind, err := catalog.KindOf(cf.Value.String())
	if err != nil || kind == catalog.REST {
		return nil
	}
	var warnings []string
	for _, name := range restOnlyFlags {
		f := fs.Lookup(name)
		if f == nil || f.Value.String() == "" {
			continue
		}
		from := "the command line"
		if s, ok := src[name]; ok {
			from = s
		}
		warnings = append(warnings, fmt.Sprintf("--%s (set by %s) is an Iceberg REST catalog's setting, and --catalog names a %s catalog, which ignores it: leave it out, or give --catalog the REST catalog's http(s):// URL",
			name, from, kind))
	}
	return warnings
}
