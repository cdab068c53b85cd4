package mapping_test

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// TestJSONSchemaDocDepthNotRecordDepth (from a review): 36cd2f1 bounds
// parseJSON at 64 levels to refuse schemaless records that nest too deep,
// and its advice is "decode such records with a schema (--value
// registry)". But parseJSON also parses registry JSON Schema documents
// (parseSchemaDoc) and JSON Schema payloads. A schema document nests far
// deeper than the records it describes (an object level is
// {"properties":{"f":{...}}}, and a nullable one
// {"oneOf":[{"type":"null"},{"type":"object","properties":{"f":...}}]},
// four levels a record level): a registry JSON Schema for records only 17
// levels deep is now refused as a schema ("nest more than 64 deep"), so
// every record of it is a dead letter, where it decoded before.
func TestJSONSchemaDocDepthNotRecordDepth(t *testing.T) {
	const levels = 17
	schema := `{"type":"object","properties":{"id":{"type":"integer"},"f":` +
		strings.Repeat(`{"oneOf":[{"type":"null"},{"type":"object","properties":{"f":`, levels) + `{"type":"integer"}` +
		strings.Repeat(`}}]}`, levels) + `}}`
	record := `{"id":1,"f":` + strings.Repeat(`{"f":`, levels) + "1" + strings.Repeat("}", levels) + "}"
	c, err := mapping.NewJSONSchemaCodec(schema, nil)
	if err != nil {
		t.Fatalf("a JSON Schema for records %d levels deep (under the 64 records may nest): %v", levels+1, err)
	}
	if _, err := c.Decode([]byte(record)); err != nil {
		t.Fatalf("a record %d levels deep: %v", levels+1, err)
	}
}
