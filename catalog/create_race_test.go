package catalog_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
)

// TestConcurrentCreatorsOfOneTable: processes that start together (the
// members of a sink's consumer group) each create the table they sink
// into, or its dead-letter table, through catalogs of their own. Exactly
// one creates it; the others learn that it exists (ErrTableAlreadyExists,
// on which floe loads it), never that another catalog owns its location:
// the metadata a creator wrote just before registering the table is not
// another catalog's. (The fault campaign's deadletters scenario had a
// member exit 2 so, its three members creating lake.events_dlq at once.)
func TestConcurrentCreatorsOfOneTable(t *testing.T) {
	dir := t.TempDir()
	cfg := catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse")}
	const creators, tables = 6, 8
	cats := make([]icecat.Catalog, creators)
	for i := range cats {
		cat, err := catalog.Open(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		cats[i] = cat
	}
	if err := cats[0].CreateNamespace(t.Context(), table.Identifier{"lake"}, nil); err != nil {
		t.Fatal(err)
	}
	sc := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	for n := range tables {
		ident := table.Identifier{"lake", fmt.Sprintf("t%d", n)}
		var wg sync.WaitGroup
		errs := make([]error, creators)
		start := make(chan struct{})
		for i, cat := range cats {
			wg.Go(func() {
				<-start
				_, errs[i] = cat.CreateTable(t.Context(), ident, sc)
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for i, err := range errs {
			switch {
			case err == nil:
				created++
			case !errors.Is(err, icecat.ErrTableAlreadyExists):
				t.Errorf("%s, creator %d: %v; want it created or ErrTableAlreadyExists", ident, i, err)
			}
		}
		if created != 1 {
			t.Errorf("%s created by %d creators, want 1", ident, created)
		}
	}
}
