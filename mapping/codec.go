package mapping

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
)

// Codec decodes record payloads written with one schema of a schema
// registry (Avro, Protobuf or JSON Schema) into canonical values
// (typed.go). The registry client fetches the schema, resolves its
// references and strips the wire header; the codec only knows the schema
// text, so that this package stays free of I/O. A codec is safe for
// concurrent use.
type Codec interface {
	// Type is the Iceberg type of the decoded values. A record, message or
	// object schema gives a *iceberg.StructType whose fields become the
	// table's top-level value columns; any other schema gives that type,
	// for one column named "value" (ColValue). Field IDs are placeholders,
	// unique within the type: the table assigns real ones. Every field,
	// list element and map value is optional, so that a later schema
	// version can drop it and the table still takes the records.
	Type() iceberg.Type
	// Decode decodes one payload (the bytes after the registry's wire
	// header) into a value of Type() in the canonical representation:
	// CheckValue accepts it. A payload the schema cannot decode is a
	// *DecodeError naming the field and the problem.
	Decode(payload []byte) (any, error)
}

// SchemaError reports a schema that cannot become a table's columns: a
// field named like one of floe's metadata columns, a recursive type, a
// construct Iceberg has no type for. It comes from creating a codec, so
// every record written with that schema is affected alike.
type SchemaError struct {
	// Format names the schema language: avro, protobuf, json-schema.
	Format string
	// Path names the field, dotted from the top-level column; empty for the
	// schema as a whole.
	Path string
	Err  error
}

func (e *SchemaError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s schema: %v", e.Format, e.Err)
	}
	return fmt.Sprintf("%s schema: field %s: %v", e.Format, e.Path, e.Err)
}

func (e *SchemaError) Unwrap() error { return e.Err }

// metadataColumns are the names of floe's own columns, which a value field
// cannot take.
var metadataColumns = []string{ColTopic, ColPartition, ColOffset, ColTimestamp, ColKey, ColHeaders, ColRawValue}

// checkColumnNames refuses top-level value fields named like a metadata
// column. The comparison ignores case: Iceberg names are case-sensitive,
// but Spark, Trino and DuckDB resolve column names without case, so
// "Kafka_Offset" would shadow floe's column in their queries.
func checkColumnNames(format string, t iceberg.Type) error {
	st, ok := t.(*iceberg.StructType)
	if !ok {
		return nil
	}
	fix := "rename the field in the schema"
	if format == "json" {
		// Schemaless JSON: the records' fields are the columns.
		fix = "rename the field in the records the producer writes"
	}
	for _, f := range st.FieldList {
		for _, m := range metadataColumns {
			if strings.EqualFold(f.Name, m) {
				return &SchemaError{Format: format, Path: f.Name,
					Err: fmt.Errorf("named like floe's metadata column %s; %s", m, fix)}
			}
		}
	}
	return nil
}

// CheckColumnNames refuses top-level fields of t (a struct of value
// columns) named like one of floe's metadata columns, in any case, as a
// *SchemaError of format: the check every codec makes of its schema, for
// columns inferred from schemaless JSON.
func CheckColumnNames(format string, t iceberg.Type) error { return checkColumnNames(format, t) }

// maxSchemaBytes bounds the schema, as JSON, that the value columns a
// record needs may have. Iceberg writes the table's schema into the header
// of every manifest, and the Avro container format iceberg-go writes them
// with refuses a header value past 1 MiB: a table past that can commit
// nothing more, and a sink retrying the record that widened it stops for
// good. Schemaless JSON widens a table with every new key (an object keyed
// by ids makes a column per id), so the limit leaves room for the
// metadata columns, the key and growth: past it, the record is a dead
// letter (found by review).
const maxSchemaBytes = 512 << 10

// CheckSchemaSize refuses value columns t whose schema, as JSON, is past
// maxSchemaBytes, as a *SchemaError of format.
func CheckSchemaSize(format string, t *iceberg.StructType) error {
	b, err := json.Marshal(t)
	if err != nil {
		return &SchemaError{Format: format, Err: fmt.Errorf("write the columns as JSON: %w", err)}
	}
	if len(b) <= maxSchemaBytes {
		return nil
	}
	return &SchemaError{Format: format, Err: fmt.Errorf("the value would make the table %d columns wide (%d KiB of schema, past floe's %d KiB: every Iceberg manifest carries the schema, in at most 1 MiB); an object keyed by ids or names makes a column of each: sink such a topic raw (without --value), or decode it with a schema that makes the object a map (--value registry)",
		countFields(t), len(b)>>10, maxSchemaBytes>>10)}
}

// countFields counts the fields of t at every depth.
func countFields(t iceberg.Type) int {
	n := 0
	switch t := t.(type) {
	case *iceberg.StructType:
		for _, f := range t.FieldList {
			n += 1 + countFields(f.Type)
		}
	case *iceberg.ListType:
		n += countFields(t.Element)
	case *iceberg.MapType:
		n += countFields(t.KeyType) + countFields(t.ValueType)
	}
	return n
}

// finishType numbers the fields of a decoded type 1..n and checks the
// top-level names: the last step of every codec's type.
func finishType(format string, t iceberg.Type) (iceberg.Type, error) {
	if err := checkColumnNames(format, t); err != nil {
		return nil, err
	}
	if st, ok := t.(*iceberg.StructType); ok && len(st.FieldList) == 0 {
		return nil, &SchemaError{Format: format, Err: fmt.Errorf("no field has a type Iceberg can hold (a table needs at least one value column)")}
	}
	next := 0
	numberFields(t, &next)
	return t, nil
}

// numberFields assigns placeholder IDs in place, as Iceberg does for a
// new table: a struct's own fields first, then the fields nested in them.
func numberFields(t iceberg.Type, next *int) {
	switch t := t.(type) {
	case *iceberg.StructType:
		for i := range t.FieldList {
			*next++
			t.FieldList[i].ID = *next
		}
		for _, f := range t.FieldList {
			numberFields(f.Type, next)
		}
	case *iceberg.ListType:
		*next++
		t.ElementID = *next
		numberFields(t.Element, next)
	case *iceberg.MapType:
		*next += 2
		t.KeyID, t.ValueID = *next-1, *next
		numberFields(t.KeyType, next)
		numberFields(t.ValueType, next)
	}
}

// optional returns a value field: always optional, so that a later schema
// version may drop it (its column then fills with nulls).
func optional(name string, t iceberg.Type) iceberg.NestedField {
	return iceberg.NestedField{Name: name, Type: t}
}

// listOf returns a list type with optional elements (see optional).
func listOf(elem iceberg.Type) *iceberg.ListType {
	return &iceberg.ListType{Element: elem}
}

// mapOf returns a map type with optional values (see optional); Iceberg
// requires map keys.
func mapOf(key, value iceberg.Type) *iceberg.MapType {
	return &iceberg.MapType{KeyType: key, ValueType: value}
}

// joinPath extends a dotted field path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// fieldErr names the field a decoding error happened in.
func fieldErr(path string, err error) error {
	return fmt.Errorf("field %s: %w", path, err)
}

// maxTypeNodes bounds the work of turning one schema into a type. A named
// type is expanded wherever it is used (Iceberg has no shared types), so a
// schema of a few lines whose types each use the next one twice expands
// exponentially; without a bound such a schema would stall the sink.
const maxTypeNodes = 100_000

// typeBudget counts the (sub)schemas a codec's builder maps.
type typeBudget struct{ spent int }

// spend counts one more and fails past maxTypeNodes.
func (b *typeBudget) spend(format, path string) error {
	b.spent++
	if b.spent > maxTypeNodes {
		return &SchemaError{Format: format, Path: path,
			Err: fmt.Errorf("the schema expands to more than %d types (a type used many times over, or deeply nested unions); no table is that wide", maxTypeNodes)}
	}
	return nil
}
