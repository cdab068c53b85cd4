package lookup

import "testing"

// TestReasonKey: dead letters that failed for the same cause get the same
// key to count them by, whatever record they were (reasons as connector's
// decoder writes them), and what a reason says to do stays.
func TestReasonKey(t *testing.T) {
	for _, c := range []struct {
		errs []string
		want string
	}{
		{[]string{
			`decode json: not valid JSON: "not json" (at byte 2: invalid character 'o' in literal null (expecting 'u'))`,
			`decode json: not valid JSON: "hello world" (at byte 1: invalid character 'h' looking for beginning of value)`,
		}, `decode json: not valid JSON: "…"`},
		{[]string{
			`field id: the table's type long cannot take a value of type string (Iceberg allows only adding optional fields and widening int to long, float to double and a decimal's precision)`,
		}, `field id: the table's type long cannot take a value of type string (Iceberg allows only adding optional fields and widening int to long, float to double and a decimal's precision)`},
		{[]string{
			`schema registry http://127.0.0.1:8081 does not have schema 999: schema not found`,
			`schema registry http://127.0.0.1:8081 does not have schema 7: schema not found`,
		}, `schema registry http://127.0.0.1:8081 does not have schema #: schema not found`},
		{[]string{
			`not in the schema registry wire format: the first byte is 0x7b ('{'), not the magic byte 0: the record looks like plain JSON text, written without a schema-registry serializer; its producer should use one (KafkaAvroSerializer, KafkaJsonSchemaSerializer, ...), or a topic of plain JSON is sunk with --value json`,
		}, `not in the schema registry wire format: the first byte is #, not the magic byte #: the record looks like plain JSON text, written without a schema-registry serializer; its producer should use one (KafkaAvroSerializer, KafkaJsonSchemaSerializer, ...), or a topic of plain JSON is sunk with --value json`},
		{[]string{
			`field n: the table's type string cannot take a value of type struct<0: a: optional long> (Iceberg allows only adding optional fields)`,
		}, `field n: the table's type string cannot take a value of type struct<0: a: optional long> (Iceberg allows only adding optional fields)`},
		{[]string{`unbalanced (remark 3`}, `unbalanced (remark #`},
	} {
		for _, err := range c.errs {
			if got := reasonPartsOf(err).key(); got != c.want {
				t.Errorf("key of %q\n = %q\nwant %q", err, got, c.want)
			}
		}
	}
}
