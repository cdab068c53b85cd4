package catalog

import (
	"regexp"
	"strconv"
)

// MetadataName is what the name of a table metadata file tells: the
// version it starts with, and whether it is the name a catalog writes.
type MetadataName struct {
	Version int64
	// UUID is true for VERSION-UUID, the names iceberg-go and Java's
	// catalogs write; false for vVERSION, a Hadoop table's, and
	// VERSION-other. A Hadoop table's catalog finds its files by name
	// (version-hint.text), so maintenance, which deletes, leaves them.
	UUID bool
}

// metadataName matches the metadata file names of Iceberg tables:
// VERSION-ID (iceberg-go and Java's catalogs write a UUID as the ID) or
// vVERSION (Hadoop tables), then the compression codec if any
// (.gz.metadata.json, .zstd.metadata.json) and .metadata.json, or a codec
// after it (.metadata.json.gz, as older Java releases wrote it). These
// are the forms iceberg-go's reader decompresses.
var metadataName = regexp.MustCompile(`^(?:v(\d+)|(\d+)-(.+?))(?:\.[a-z0-9]+)?\.metadata\.json(?:\.gz|\.zstd)?$`)

var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// ParseMetadataName parses the base name of a table metadata file; ok is
// false for a file of another kind (a manifest, version-hint.text, a
// temporary file).
func ParseMetadataName(name string) (n MetadataName, ok bool) {
	m := metadataName.FindStringSubmatch(name)
	if m == nil {
		return MetadataName{}, false
	}
	digits := m[1] + m[2] // one of them is empty
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return MetadataName{}, false
	}
	return MetadataName{Version: v, UUID: uuidText.MatchString(m[3])}, true
}
