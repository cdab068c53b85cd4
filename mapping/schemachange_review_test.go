package mapping

import (
	"slices"
	"testing"

	"github.com/apache/iceberg-go"
)

// TestSchemaChangesOfAnotherWritersRenameAndDrop (from a review): docs/typed-tables.md
// says a sink logs each schema change it sees at INFO, its own or another
// writer's. Another writer that renames a column (userID to user_id, the
// usual fix of a case clash the sink warned of) and drops one changes the
// schema, yet SchemaChanges lists nothing, so noteSchema logs nothing:
// only additions and promotions are reported.
func TestSchemaChangesOfAnotherWritersRenameAndDrop(t *testing.T) {
	before := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "userId", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "userID", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 3, Name: "n", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	)
	after := iceberg.NewSchema(1,
		iceberg.NestedField{ID: 1, Name: "userId", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 3, Name: "count", Type: iceberg.PrimitiveTypes.Int64},
	)
	changes, err := SchemaChanges(before, after)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.String())
	}
	want := []string{"renamed n to count", "made optional count", "dropped userID"}
	if !slices.Equal(got, want) {
		t.Errorf("schema 0 to 1 (userID dropped, n renamed count and made optional): changes %q, want %q", got, want)
	}
}
