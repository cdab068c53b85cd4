package catalog

import (
	"testing"

	"github.com/apache/iceberg-go/table"
)

// TestNamespaceKey: the key iceberg-go's SQL catalog stores a namespace
// under (namespaceToString in catalog/sql).
func TestNamespaceKey(t *testing.T) {
	for _, c := range []struct {
		ns   table.Identifier
		want string
	}{
		{table.Identifier{"lake"}, "lake"},
		{table.Identifier{"a", "b"}, "a.b"},
		{table.Identifier{"a.b", "c"}, `__iceberg_namespace_v1__:["a.b","c"]`},
	} {
		if got := namespaceKey(c.ns); got != c.want {
			t.Errorf("namespaceKey(%q) = %q, want %q", c.ns, got, c.want)
		}
	}
}
