package connector_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/localstack"
)

// TestJSONSchemaRefSiblingsKept: since JSON Schema draft 2019-09, $ref is
// an applicator like allOf: its sibling keywords apply too, so {"$ref":
// "#/$defs/Base", "properties": {"extra": ...}} declares both Base's
// properties and extra. floe's codec followed $ref and ignored its
// siblings: extra got no column and its value was dropped from every
// record, without a dead letter (from a review).
func TestJSONSchemaRefSiblingsKept(t *testing.T) {
	e := newEnv(t)
	e.Topic("refsib", 1, nil)
	id := register(t, e.Stack.Registry, "refsib-value", sr.Schema{Type: sr.TypeJSON, Schema: `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}}}},
  "$ref": "#/$defs/Base",
  "properties": {"extra": {"type": "string"}}
}`})
	e.Produce([]*kgo.Record{{Topic: "refsib", Value: localstack.WireFormat(id, nil, []byte(`{"id":1,"extra":"x"}`))}})
	tbl, dlq := sinkRegistryTopic(t, e, "refsib")
	dead := valuesDead(t, dlq)
	if len(dead) > 0 {
		t.Logf("dead letters: %v", dead)
		return
	}
	var cols []string
	for _, f := range tbl.Iceberg().Schema().Fields() {
		cols = append(cols, f.Name)
	}
	if got := valuesScan(t, tbl, "extra")[0]; got != "x" {
		t.Errorf("extra = %v, want \"x\" (columns %v, id = %v): a property the schema declares was dropped without a dead letter",
			got, cols, valuesScan(t, tbl, "id")[0])
	}
}
