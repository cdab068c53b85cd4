package catalog

import "testing"

// TestParseMetadataName: the versions of the metadata file names
// iceberg-go, Java's catalogs and Hadoop tables write, compressed or not,
// and which are the UUID names catalogs write; other files of a metadata
// folder have none.
func TestParseMetadataName(t *testing.T) {
	const uuid = "8d2c1f3a-0b7e-4c55-9a51-1f2e3d4c5b6a"
	for name, want := range map[string]MetadataName{
		"00012-" + uuid + ".metadata.json":                         {12, true},
		"00012-" + uuid + ".gz.metadata.json":                      {12, true},
		"00012-" + uuid + ".zstd.metadata.json":                    {12, true},
		"00012-" + uuid + ".metadata.json.gz":                      {12, true},
		"00012-" + uuid + ".metadata.json.zstd":                    {12, true},
		"00012-8D2C1F3A-0B7E-4C55-9A51-1F2E3D4C5B6A.metadata.json": {12, true},
		"00100-x.gz.metadata.json":                                 {100, false},
		"00007-x.metadata.json.gz":                                 {7, false},
		"v3.metadata.json":                                         {3, false},
		"v3.gz.metadata.json":                                      {3, false},
		"123456-x.metadata.json.zstd":                              {123456, false},
		"00012-" + uuid + "x.metadata.json":                        {12, false},
	} {
		if got, ok := ParseMetadataName(name); !ok || got != want {
			t.Errorf("ParseMetadataName(%q) = %+v, %v; want %+v", name, got, ok, want)
		}
	}
	for _, name := range []string{"snap-1-1-x.avro", "x-m0.avro", "version-hint.text", "00012-x.metadata.json.tmp", "abc-x.metadata.json",
		"v.metadata.json", "-x.metadata.json", "00012-.metadata.json", "99999999999999999999-x.metadata.json"} {
		if got, ok := ParseMetadataName(name); ok {
			t.Errorf("ParseMetadataName(%q) = %+v; want no version", name, got)
		}
	}
}
