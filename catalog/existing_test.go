package catalog_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/catalog"
)

// listDir returns the names under dir, recursively.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err == nil && p != dir {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestOpenExistingCreatesNothing: Config.Existing on a SQLite catalog that
// does not exist fails with ErrCatalogNotFound naming the absolute path it
// looked at, and leaves no file or folder behind: not the default
// ./floe-data/, not the folder of a given path.
func TestOpenExistingCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for spec, want := range map[string]string{
		"":                     filepath.Join(dir, catalog.DefaultCatalog),
		"sub/dir/catalog.db":   filepath.Join(dir, "sub/dir/catalog.db"),
		"sqlite://x/c.db":      filepath.Join(dir, "x/c.db"),
		"file:y/c.db?mode=rwc": filepath.Join(dir, "y/c.db"),
	} {
		_, err := catalog.Open(t.Context(), catalog.Config{Catalog: spec, Existing: true})
		if !errors.Is(err, catalog.ErrCatalogNotFound) || !strings.Contains(err.Error(), want) {
			t.Errorf("catalog %q: %v; want ErrCatalogNotFound naming %s", spec, err, want)
		}
	}
	if got := listDir(t, dir); len(got) > 0 {
		t.Errorf("opening missing catalogs as existing created %v", got)
	}
}

// TestOpenLogsANewCatalog: without Existing a missing SQLite catalog is
// created, and the log says so (once: opening it again is silent); then
// Existing opens it without creating the default warehouse folder.
func TestOpenLogsANewCatalog(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	path := filepath.Join(dir, "new", "folder", "catalog.db")
	wh := filepath.Join(dir, "wh")
	for range 2 {
		if _, err := catalog.Open(t.Context(), catalog.Config{Catalog: "new/folder/catalog.db", Warehouse: wh, Logger: log}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "creating a new SQLite catalog"); n != 1 || !strings.Contains(logs.String(), path) {
		t.Errorf("want one log line naming the new catalog %s, got:\n%s", path, logs.String())
	}
	if _, err := catalog.Open(t.Context(), catalog.Config{Catalog: path, Existing: true, Logger: log}); err != nil {
		t.Fatalf("open the existing catalog: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, catalog.DefaultWarehouse)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("opening an existing catalog without a warehouse made the default warehouse folder (%v)", err)
	}
}

// TestOpenExistingNeedsNoWarehouse: PostgreSQL and Glue catalogs need a
// warehouse only to create tables. Opened without one, existing or not,
// Open goes on to the catalog itself (here a closed port, and Glue, which
// contacts nothing on open), and creating a table without a location is
// the no-warehouse error, before the catalog is asked.
func TestOpenExistingNeedsNoWarehouse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	s3 := catalog.S3Config{Region: "us-east-1", AccessKeyID: "k", SecretAccessKey: "s"}
	pg := "postgres://floe:pw@" + closed + "/iceberg?sslmode=disable"

	for _, existing := range []bool{false, true} {
		cat, err := catalog.Open(t.Context(), catalog.Config{Catalog: "glue", S3: s3, Existing: existing})
		if err != nil {
			t.Fatalf("glue without a warehouse (existing %v): %v", existing, err)
		}
		_, err = cat.CreateTable(t.Context(), []string{"lake", "t"}, iceberg.NewSchema(0))
		var cfgErr *catalog.ConfigError
		if !errors.As(err, &cfgErr) || cfgErr.Setting != catalog.SettingWarehouse {
			t.Errorf("create a table in glue without a warehouse (existing %v): %v; want a no-warehouse error", existing, err)
		}
		_, err = catalog.Open(t.Context(), catalog.Config{Catalog: pg, S3: s3, Existing: existing})
		if !errors.Is(err, catalog.ErrCatalogUnreachable) {
			t.Errorf("postgres without a warehouse (existing %v): %v; want the catalog unreachable", existing, err)
		}
	}
}
