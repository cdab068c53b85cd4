package catalog_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
)

// TestUnreachableIsAttributed opens a PostgreSQL catalog whose warehouse is
// on S3 (versitygw) and stops one server at a time: a catalog call fails
// naming the component that stopped. Both fail with a refused connection;
// the catalog used to call every refused connection the object store's,
// so a PostgreSQL outage read "object store unreachable".
func TestUnreachableIsAttributed(t *testing.T) {
	s3 := testenv.VersityGW(t)
	s3.CreateBucket(t, "lake")
	pg := testenv.Postgres(t)
	dir := t.TempDir()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))

	cat, err := catalog.Open(t.Context(), catalog.Config{
		Catalog:   pg.URI,
		Warehouse: "s3://lake/warehouse",
		S3:        catalog.S3Config{Endpoint: s3.Endpoint, Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"lake", "t"}
	if err := cat.CreateNamespace(t.Context(), ident[:1], nil); err != nil {
		t.Fatal(err)
	}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	if _, err := cat.CreateTable(t.Context(), ident, sc); err != nil {
		t.Fatal(err)
	}

	check := func(what string, err, want, not error) {
		t.Helper()
		if !errors.Is(err, want) || errors.Is(err, not) || !strings.HasPrefix(err.Error(), want.Error()) {
			t.Errorf("%s: %v\nwant an error starting with %q", what, err, want)
		}
	}

	pg.Stop()
	_, err = cat.LoadTable(t.Context(), ident)
	check("load with PostgreSQL stopped", err, catalog.ErrCatalogUnreachable, catalog.ErrStorageUnreachable)
	_, err = cat.CheckTableExists(t.Context(), ident)
	check("exists with PostgreSQL stopped", err, catalog.ErrCatalogUnreachable, catalog.ErrStorageUnreachable)
	pg.Start()

	s3.Stop()
	_, err = cat.LoadTable(t.Context(), ident)
	check("load with S3 stopped", err, catalog.ErrStorageUnreachable, catalog.ErrCatalogUnreachable)
	if err != nil && !strings.Contains(err.Error(), s3.Endpoint) {
		t.Errorf("load with S3 stopped: %v\nwant the endpoint named", err)
	}
}
