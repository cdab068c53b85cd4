package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestConfigTagInMapping (from a review of this change set): a value
// starting with '!' inside a mapping (catalog-prop, where secrets go) or a
// list was read cut short; it is refused as a scalar's is.
func TestConfigTagInMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "floe.yaml")
	if err := os.WriteFile(path, []byte("catalog-prop:\n  credential: !client:Secret-9f1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := loadConfigFile(path, map[string]bool{"catalog-prop": true})
	if err == nil {
		t.Errorf("catalog-prop value starting with '!' accepted as %q; want it refused as a plain value's is", c.values["catalog-prop"])
	}
}
