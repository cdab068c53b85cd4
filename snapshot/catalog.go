package snapshot

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/uptrace/bun/driver/sqliteshim"
)

// Defaults of the zero-setup layout: everything under ./floe-data.
const (
	DefaultCatalog   = "floe-data/catalog.db"
	DefaultWarehouse = "floe-data/warehouse"
)

// CatalogConfig says where the catalog and the warehouse are.
type CatalogConfig struct {
	// Catalog is a SQLite file path (or sqlite:// / file: URI). Empty means
	// DefaultCatalog.
	Catalog string
	// Warehouse is the root URI new tables are created under: a local path,
	// file:// URI or s3:// URI. Empty means DefaultWarehouse.
	Warehouse string
	// Props are extra catalog properties, passed through to iceberg-go.
	Props map[string]string
}

// OpenCatalog opens (and on first use initialises) the catalog.
func OpenCatalog(ctx context.Context, cfg CatalogConfig) (catalog.Catalog, error) {
	wh, err := warehouseURI(cfg.Warehouse)
	if err != nil {
		return nil, err
	}
	props := iceberg.Properties{"warehouse": wh}
	for k, v := range cfg.Props {
		props[k] = v
	}
	spec := cfg.Catalog
	if spec == "" {
		spec = DefaultCatalog
	}
	switch {
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return nil, fmt.Errorf("open catalog %s: PostgreSQL catalogs are not supported yet; use a SQLite file path", redact(spec))
	case strings.Contains(spec, "://") && !strings.HasPrefix(spec, "sqlite://") && !strings.HasPrefix(spec, "file://"):
		return nil, fmt.Errorf("open catalog %s: unsupported catalog URI; use a SQLite file path", redact(spec))
	}
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
	cat, err := catalog.Load(ctx, "floe", props)
	if err != nil {
		return nil, fmt.Errorf("open SQLite catalog %s: %w", path, err)
	}
	return cat, nil
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
