package mapping_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/mapping"
)

// TestJSONTooDeep (from a review): a record nesting arrays a thousand deep
// made a nested column every later flush paid minutes for; a column past
// 64 levels is a decode error (a dead letter), and 64 levels still decode.
// A table that already has a deeper column (sunk before the bound) keeps
// taking records that fit it, so that the content audit of such a table,
// which decodes them again, still finds its rows (from a review).
func TestJSONTooDeep(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n) + "1" + strings.Repeat("]", n) + "}")
	}
	if _, _, _, err := mapping.DecodeJSON(nest(63), &iceberg.StructType{}); err != nil {
		t.Fatalf("63 lists deep in an object: %v", err)
	}
	deep, _, _, err := mapping.DecodeJSON(nest(1000), &iceberg.StructType{})
	if err == nil {
		t.Fatalf("1000 lists deep made columns %v", deep)
	}
	_, _, _, err = mapping.DecodeJSON(nest(1000), &iceberg.StructType{})
	var de *mapping.DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "a column nesting 1001 deep (objects and arrays), past 64") {
		t.Fatalf("1000 lists deep: %v", err)
	}
}

// TestSchemaSizeLimit (from a review): an object keyed by ids made a
// column of each, until the schema outgrew what a manifest's header holds
// and no commit could land; past 512 KiB of schema the record is refused.
func TestSchemaSizeLimit(t *testing.T) {
	wide := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"scores":{`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"user%06d":%d`, i, i)
		}
		b.WriteString("}}")
		return []byte(b.String())
	}
	st, _, _, err := mapping.DecodeJSON(wide(500), &iceberg.StructType{})
	if err != nil || mapping.CheckSchemaSize("json", st) != nil {
		t.Fatalf("500 columns: %v, %v", err, mapping.CheckSchemaSize("json", st))
	}
	_, _, _, err = mapping.DecodeJSON(wide(20000), &iceberg.StructType{})
	var se *mapping.SchemaError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "20001 columns wide") || !strings.Contains(err.Error(), "without --value") {
		t.Fatalf("20,000 columns: %v", err)
	}
}
