package mapping_test

import (
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/mapping"
)

// TestDebeziumEventLookalikes (from a review): records that merely have
// fields named op, after and source (an application's audit events: op
// "login", source "web", after a time) are not Debezium change events, and
// the sink must not warn that they are (nor replace the advice of a run of
// only dead letters by "sink with --envelope debezium"). A Debezium event's
// after is a row (a struct, or null), its source a struct, its op a string
// of one letter (c, r, u, d, t, m).
func TestDebeziumEventLookalikes(t *testing.T) {
	s := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "op", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 2, Name: "after", Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 3, Name: "source", Type: iceberg.PrimitiveTypes.String},
		iceberg.NestedField{ID: 4, Name: "user", Type: iceberg.PrimitiveTypes.String},
	)
	if at, ok := mapping.DebeziumEventColumns(s); ok {
		t.Errorf("columns op string, after timestamptz, source string taken for Debezium change events (at %q)", at)
	}
	if at, ok := mapping.DebeziumEventJSON([]byte(`{"op":"login","after":"2026-12-06T08:00:00Z","source":"web","user":"ann"}`)); ok {
		t.Errorf("an audit event with op, after and source strings taken for a Debezium change event (at %q)", at)
	}
	// The real thing still is one.
	if _, ok := mapping.DebeziumEventJSON([]byte(`{"before":null,"after":{"id":1},"source":{"table":"customers"},"op":"c","ts_ms":1}`)); !ok {
		t.Error("a Debezium change event not recognised")
	}
}
