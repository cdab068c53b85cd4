package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/snapshot"
)

// TestTableNotFoundNamesCatalogName: a SQL catalog sees only the tables
// stored under its catalog name, so a --catalog-name copied from a Spark
// or Trino setup makes an existing table "not exist". The error names the
// catalog name it looked under (from a new-user run, where it named only
// --table and --catalog); with the default name it says nothing of it.
func TestTableNotFoundNamesCatalogName(t *testing.T) {
	dir := t.TempDir()
	cfg := catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse")}
	cat, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Open(t.Context(), cat, []string{"lake", "orders"}, snapshot.OpenOptions{Create: true}); err != nil {
		t.Fatal(err)
	}
	code, _, errs := floe(t, "status", "--table", "lake.orders", "--catalog", cfg.Catalog, "--catalog-name", "spark")
	if want := `looked under --catalog-name "spark"`; code != exitError || !strings.Contains(errs, "table lake.orders does not exist in the catalog") || !strings.Contains(errs, want) {
		t.Errorf("status with another --catalog-name: exit %d, stderr %q; want exit 2 naming %s", code, errs, want)
	}
	code, _, errs = floe(t, "status", "--table", "lake.ordres", "--catalog", cfg.Catalog)
	if code != exitError || strings.Contains(errs, "--catalog-name") || !strings.Contains(errs, "did you mean lake.orders?") {
		t.Errorf("status of a misspelt table: exit %d, stderr %q; want exit 2, a suggestion and no word of --catalog-name", code, errs)
	}
	if code, out, errs := floe(t, "status", "--table", "lake.orders", "--catalog", cfg.Catalog); code != 0 {
		t.Errorf("status with the default catalog name: exit %d\n%s%s", code, out, errs)
	}
}

// TestDropMisspeltTableSuggests (from a new-user run): floe drop --table
// lake.ordres said only that the table does not exist, where floe audit
// (every command that opens --table) names lake.orders: drop says it the
// same way, with and without --yes, and drops nothing.
func TestDropMisspeltTableSuggests(t *testing.T) {
	dir := t.TempDir()
	cfg := catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse")}
	cat, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Open(t.Context(), cat, []string{"lake", "orders"}, snapshot.OpenOptions{Create: true}); err != nil {
		t.Fatal(err)
	}
	for _, yes := range [][]string{nil, {"--yes"}} {
		code, out, errs := floe(t, append([]string{"drop", "--table", "lake.ordres", "--catalog", cfg.Catalog}, yes...)...)
		if code != exitError || out != "" || !strings.Contains(errs, "table lake.ordres does not exist in the catalog") || !strings.Contains(errs, "did you mean lake.orders?") {
			t.Errorf("drop %v of a misspelt table: exit %d, stdout %q, stderr %q; want exit 2 and a suggestion", yes, code, out, errs)
		}
	}
	if ok, err := cat.CheckTableExists(t.Context(), []string{"lake", "orders"}); err != nil || !ok {
		t.Fatalf("lake.orders after the drops of lake.ordres: exists %v, %v", ok, err)
	}
}
