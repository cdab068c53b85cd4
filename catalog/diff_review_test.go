package catalog_test

import (
	"testing"

	"github.com/floe-dev/floe/catalog"
)

// TestKeywordDSNRelativePath (from a review of this change set): a
// relative SQLite path such as user=alice/catalog.db was refused as a
// libpq keyword DSN; a DSN needs two of its keys.
func TestKeywordDSNRelativePath(t *testing.T) {
	for _, p := range []string{"user=alice/catalog.db", "host=ci-7/floe.db"} {
		if k, err := catalog.KindOf(p); err != nil || k != catalog.SQLite {
			t.Errorf("KindOf(%q) = %v, %v; want a SQLite catalog at that path", p, k, err)
		}
	}
}
