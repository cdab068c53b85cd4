package catalog_test

import (
	"sync"
	"testing"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
)

// TestPostgresOpenTogether opens eight catalogs at once on a new
// PostgreSQL database, as processes (or a sink and a command) starting
// together do: every open succeeds. They race to create the catalog's
// tables, and PostgreSQL reports a loser as a unique violation or as
// "type ... already exists" (duplicate_object); the second used to fail
// the open.
func TestPostgresOpenTogether(t *testing.T) {
	pg := testenv.Postgres(t)
	warehouse := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = catalog.Open(t.Context(), catalog.Config{Catalog: pg.URI, Warehouse: warehouse})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
}
