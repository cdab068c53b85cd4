package snapshot_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// TestOpenRefusesMissingBranch: writing a branch that does not exist would
// fork it from main, so Open refuses it.
func TestOpenRefusesMissingBranch(t *testing.T) {
	dir := t.TempDir()
	cat, err := snapshot.OpenCatalog(t.Context(), snapshot.CatalogConfig{
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	ident := []string{"lake", "branches"}
	tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Branch: "rebuild"})
	if err == nil || !strings.Contains(err.Error(), `has no branch "rebuild"`) {
		t.Fatalf("err = %v, want a refusal naming the branch", err)
	}
	if err := tbl.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Branch: "rebuild"}); err != nil {
		t.Fatal(err)
	}
}
