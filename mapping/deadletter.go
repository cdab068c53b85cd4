package mapping

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
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
	// ColCommitID is the id of the data table's floe commit whose ledger
	// accounts for the dead letter (Commit.ID): which dead letters a
	// dead-letter table must hold is exactly what the live ledger's
	// commits name, and this column says which commit each row belongs
	// to. Null only in rows written before the column existed.
	ColCommitID = "floe_commit_id"
)

// deadLetterFieldID is the field ID of the first column DeadLetterSchema
// adds to the metadata columns.
const deadLetterFieldID = 100

// DeadLetterLayout is the layout of a dead-letter table: the key and the
// value as produced, then the reason.
var DeadLetterLayout = Layout{Value: ValueJSON, Key: KeyRaw, RawValue: true}

// DeadLetterSchema is the schema of a dead-letter table: floe's metadata
// columns with the raw key (kafka_key), the raw value (kafka_value), why
// the record could not be decoded (error), and the registry schema id it
// named (schema_id, when it named one), and the data table's commit that
// accounts for it (floe_commit_id). A dead letter keeps everything the
// record had, so that it can be decoded again once its problem is fixed.
func DeadLetterSchema() *iceberg.Schema {
	fields := DeadLetterLayout.Schema().Fields()
	next := deadLetterFieldID
	fields = append(fields,
		iceberg.NestedField{ID: next, Name: ColError, Type: iceberg.PrimitiveTypes.String,
			Doc: "why the record could not become a row of the data table"},
		iceberg.NestedField{ID: next + 1, Name: ColSchemaID, Type: iceberg.PrimitiveTypes.Int32,
			Doc: "schema registry id the record was written with, when it named one"},
		CommitIDField(next+2))
	return iceberg.NewSchema(0, fields...)
}

// CommitIDField is the ColCommitID column with field ID id (a table that
// lacks it gets it with the ID the table assigns).
func CommitIDField(id int) iceberg.NestedField {
	return iceberg.NestedField{ID: id, Name: ColCommitID, Type: iceberg.PrimitiveTypes.String,
		Doc: "id of the data table's floe commit whose ledger accounts for this dead letter (its snapshot summary's floe.commit-id)"}
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

// StampCommitID returns batch, dead-letter rows (DeadLetterArrowSchema),
// with every row's ColCommitID set to id: a commit's dead letters are
// built before the commit has an id, and written after. The caller owns
// the result; batch is left as it is.
func StampCommitID(mem memory.Allocator, batch arrow.RecordBatch, id string) (arrow.RecordBatch, error) {
	idx := batch.Schema().FieldIndices(ColCommitID)
	if len(idx) != 1 || batch.Schema().Field(idx[0]).Type.ID() != arrow.STRING {
		return nil, fmt.Errorf("dead-letter rows have no %s string column", ColCommitID)
	}
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.Reserve(int(batch.NumRows()))
	for range batch.NumRows() {
		b.Append(id)
	}
	ids := b.NewArray()
	defer ids.Release()
	cols := slices.Clone(batch.Columns())
	cols[idx[0]] = ids
	return array.NewRecordBatch(batch.Schema(), cols, batch.NumRows()), nil
}
