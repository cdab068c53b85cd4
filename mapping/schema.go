package mapping

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Column names of the table. They are part of floe's public contract: the
// audit, the lookups and users' queries depend on them, so they never change.
const (
	ColTopic     = "kafka_topic"
	ColPartition = "kafka_partition"
	ColOffset    = "kafka_offset"
	ColTimestamp = "kafka_timestamp"
	ColKey       = "kafka_key"
	ColHeaders   = "kafka_headers"
	ColValue     = "value"
	// ColRawValue keeps the value bytes beside a typed table's decoded
	// columns (--keep-raw-value).
	ColRawValue = "kafka_value"
)

// Schema returns the Iceberg schema of a floe table in raw value mode. Field
// IDs are fixed so that two floe tables always agree on them.
func Schema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: ColTopic, Type: iceberg.PrimitiveTypes.String, Required: true,
			Doc: "Kafka topic the record was read from"},
		iceberg.NestedField{ID: 2, Name: ColPartition, Type: iceberg.PrimitiveTypes.Int32, Required: true,
			Doc: "Kafka partition the record was read from"},
		iceberg.NestedField{ID: 3, Name: ColOffset, Type: iceberg.PrimitiveTypes.Int64, Required: true,
			Doc: "offset of the record in its partition"},
		iceberg.NestedField{ID: 4, Name: ColTimestamp, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true,
			Doc: "record timestamp (CreateTime or LogAppendTime), UTC, microseconds"},
		iceberg.NestedField{ID: 5, Name: ColKey, Type: iceberg.PrimitiveTypes.Binary, Required: false,
			Doc: "record key; null when the record has no key"},
		iceberg.NestedField{ID: 6, Name: ColHeaders, Required: true, Doc: "record headers in order; keys may repeat",
			Type: &iceberg.ListType{
				ElementID: 8, ElementRequired: true,
				Element: &iceberg.StructType{FieldList: []iceberg.NestedField{
					{ID: 9, Name: "key", Type: iceberg.PrimitiveTypes.String, Required: true},
					{ID: 10, Name: "value", Type: iceberg.PrimitiveTypes.Binary, Required: false},
				}},
			}},
		iceberg.NestedField{ID: 7, Name: ColValue, Type: iceberg.PrimitiveTypes.Binary, Required: false,
			Doc: "record value as written by the producer; null for a tombstone"},
	)
}

// ArrowSchema returns the Arrow schema floe writes into a table whose
// Iceberg schema is tableSchema: the floe columns in floe's order, carrying
// the table's own field IDs (a catalog may renumber IDs at creation, and the
// Parquet writer matches columns by ID). Call RawLayout.Check first.
func ArrowSchema(tableSchema *iceberg.Schema) (*arrow.Schema, error) {
	names := make([]string, 0, len(Schema().Fields()))
	for _, f := range Schema().Fields() {
		names = append(names, f.Name)
	}
	proj, err := tableSchema.Select(true, names...)
	if err != nil {
		return nil, fmt.Errorf("project table schema onto floe columns: %w", err)
	}
	sc, err := table.SchemaToArrowSchema(proj, nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("convert floe schema to arrow: %w", err)
	}
	for i, n := range names {
		if sc.Field(i).Name != n {
			return nil, fmt.Errorf("table schema orders column %q at %d, expected %q", sc.Field(i).Name, i, n)
		}
	}
	return sc, nil
}

// sameType compares types by shape, ignoring field IDs, which a catalog
// assigns on its own.
func sameType(a, b iceberg.Type) bool {
	switch a := a.(type) {
	case *iceberg.ListType:
		b, ok := b.(*iceberg.ListType)
		return ok && a.ElementRequired == b.ElementRequired && sameType(a.Element, b.Element)
	case *iceberg.StructType:
		b, ok := b.(*iceberg.StructType)
		if !ok || len(a.FieldList) != len(b.FieldList) {
			return false
		}
		for i, f := range a.FieldList {
			g := b.FieldList[i]
			if f.Name != g.Name || f.Required != g.Required || !sameType(f.Type, g.Type) {
				return false
			}
		}
		return true
	default:
		return a.Equals(b)
	}
}
