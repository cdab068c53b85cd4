package mapping

import (
	"testing"
)

// TestJSONSchemaRefSiblingsNotRefused: properties beside $ref now merge with its
// target as allOf (80d4dfa). Schemas that were codecs before are refused:
// a sibling that only annotates an inherited property (a description, no
// type: read as untyped JSON text, which "conflicts" with the target's
// type), a $ref to a map-like object (additionalProperties), a $ref to a
// non-object, and a draft-07 schema (whose $ref siblings the spec says to
// ignore, as docs/typed-tables.md's "2019-09 on" implies) with a sibling
// that types a property otherwise. A topic whose registry schema is one
// of these sank before the upgrade and is refused after it.
//
// From a review of this change; fixed since.
func TestJSONSchemaRefSiblingsNotRefused(t *testing.T) {
	for name, schema := range map[string]string{
		"annotation-only sibling": `{"type":"object","properties":{"a":{"$ref":"#/$defs/N",
			"properties":{"id":{"description":"the id"}}}},
			"$defs":{"N":{"type":"object","properties":{"id":{"type":"integer"}}}}}`,
		"$ref to a map-like object": `{"type":"object","properties":{"a":{"$ref":"#/$defs/N",
			"properties":{"m":{"type":"string"}}}},
			"$defs":{"N":{"type":"object","additionalProperties":{"type":"string"}}}}`,
		"properties beside a $ref to a string": `{"type":"object","properties":{"name":{
			"$ref":"#/definitions/Name","properties":{"first":{"type":"string"}}}},
			"definitions":{"Name":{"type":"string"}}}`,
		"draft-07 conflicting sibling": `{"$schema":"http://json-schema.org/draft-07/schema#",
			"definitions":{"Base":{"type":"object","properties":{"id":{"type":"integer"}}}},
			"$ref":"#/definitions/Base","properties":{"id":{"type":"string"}}}`,
	} {
		if _, err := NewJSONSchemaCodec(schema, nil); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
}
