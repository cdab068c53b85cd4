package catalog

import (
	"testing"

	"github.com/apache/iceberg-go/table"
)

// TestMetadataVersion: the versions of the metadata file names iceberg-go,
// Java's catalogs and Hadoop tables write, compressed or not; other files
// of a metadata folder have none.
func TestMetadataVersion(t *testing.T) {
	for name, want := range map[string]int64{
		"00012-8d2c1f3a-0b7e-4c55-9a51-1f2e3d4c5b6a.metadata.json": 12,
		"00100-x.gz.metadata.json":                                 100,
		"00007-x.metadata.json.gz":                                 7,
		"v3.metadata.json":                                         3,
		"v3.gz.metadata.json":                                      3,
		"123456-x.metadata.json.zstd":                              123456,
	} {
		if got, ok := metadataVersion(name); !ok || got != want {
			t.Errorf("metadataVersion(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"snap-1-1-x.avro", "x-m0.avro", "version-hint.text", "00012-x.metadata.json.tmp", "abc-x.metadata.json", "v.metadata.json", "-x.metadata.json"} {
		if got, ok := metadataVersion(name); ok {
			t.Errorf("metadataVersion(%q) = %d; want no version", name, got)
		}
	}
}

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
