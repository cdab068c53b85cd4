package mapping

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Columns of a dead-letter table beside floe's metadata columns.
const (
	// ColError says why the record could not become a row.
	ColError = "error"
	// ColSchemaID is the schema registry id the record was written with,
	// when it had one.
	ColSchemaID = "schema_id"
)

// DeadLetterLayout is the layout of a dead-letter table: the key and the
// value as produced, then the reason.
var DeadLetterLayout = Layout{Value: ValueJSON, Key: KeyRaw, RawValue: true}

// DeadLetterSchema is the schema of a dead-letter table: floe's metadata
// columns with the raw key (kafka_key), the raw value (kafka_value), why
// the record could not be decoded (error), and the registry schema id it
// named (schema_id, when it named one). A dead letter keeps everything the
// record had, so that it can be decoded again once its problem is fixed.
func DeadLetterSchema() *iceberg.Schema {
	fields := DeadLetterLayout.Schema().Fields()
	next := 100
	fields = append(fields,
		iceberg.NestedField{ID: next, Name: ColError, Type: iceberg.PrimitiveTypes.String,
			Doc: "why the record could not become a row of the data table"},
		iceberg.NestedField{ID: next + 1, Name: ColSchemaID, Type: iceberg.PrimitiveTypes.Int32,
			Doc: "schema registry id the record was written with, when it named one"})
	return iceberg.NewSchema(0, fields...)
}

// DeadLetterArrowSchema is the Arrow schema of a dead-letter table's rows
// for its Iceberg schema.
func DeadLetterArrowSchema(tableSchema *iceberg.Schema) (*arrow.Schema, error) {
	return DeadLetterLayout.ArrowSchema(tableSchema)
}

// NewDeadLetterBuilder returns a builder of dead-letter rows for the given
// Arrow schema (DeadLetterArrowSchema).
func NewDeadLetterBuilder(mem memory.Allocator, schema *arrow.Schema) (*RowBuilder, error) {
	return DeadLetterLayout.NewRowBuilder(mem, schema)
}

// AppendDeadLetter adds record r to a dead-letter builder, with the reason
// it could not be a row and the schema id it named (0: none).
func (rb *RowBuilder) AppendDeadLetter(r *kgo.Record, reason string, schemaID int) error {
	var key, id any
	if r.Key != nil {
		key = r.Key
	}
	if schemaID != 0 {
		id = int32(schemaID)
	}
	return rb.AppendDecoded(r, key, map[string]any{ColError: reason, ColSchemaID: id})
}
