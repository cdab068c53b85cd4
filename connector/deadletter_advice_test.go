package connector_test

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestOnlyDeadLettersAdvice: the advice after a run of only dead letters
// follows the first one's reason. A field named like floe's column decoded
// all the same, and the advice said to check the layout flags (from a
// new-user run).
func TestOnlyDeadLettersAdvice(t *testing.T) {
	reserved := mapping.CheckColumnNames("avro", &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: "Kafka_Offset", Type: iceberg.PrimitiveTypes.Int64}}})
	if reserved == nil {
		t.Fatal("a field named Kafka_Offset is taken")
	}
	for reason, want := range map[string]string{
		reserved.Error(): "a field is named like one of floe's columns",
		`decode json: not valid JSON: "x" (at byte 1: invalid character 'x' looking for beginning of value)`:                        "check that --value, --key and --schema-registry match",
		"a Debezium truncate event (op t): floe does not empty the table for it unless the sink runs with --on-truncate delete-all": "no --value, --key or --schema-registry makes rows of such records",
	} {
		if got := connector.OnlyDeadLettersAdvice(reason); !strings.Contains(got, want) {
			t.Errorf("advice for %q: %q, want it to say %q", reason, got, want)
		}
	}
}
