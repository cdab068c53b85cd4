package mapping

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// ValueMode says how a record's value becomes columns.
type ValueMode string

// The value modes.
const (
	// ValueRaw keeps the value bytes as produced in the binary column value.
	ValueRaw ValueMode = "raw"
	// ValueJSON decodes schemaless JSON objects into typed columns, inferred
	// from the values (DecodeJSON).
	ValueJSON ValueMode = "json"
	// ValueRegistry decodes the Confluent wire format (Avro, Protobuf or JSON
	// Schema, from a schema registry) into typed columns.
	ValueRegistry ValueMode = "registry"
)

// KeyMode says how a record's key becomes the kafka_key column.
type KeyMode string

// The key modes.
const (
	// KeyRaw keeps the key bytes (binary).
	KeyRaw KeyMode = "raw"
	// KeyString keeps the key as UTF-8 text (string); a key that is not
	// valid UTF-8 is a dead letter.
	KeyString KeyMode = "string"
	// KeyJSON and KeyRegistry decode the key like a value, into a struct.
	KeyJSON     KeyMode = "json"
	KeyRegistry KeyMode = "registry"
)

// Table properties that record a table's layout. A table keeps the layout
// it was created with: a sink of another layout is refused.
const (
	PropValue    = "floe.value"
	PropKey      = "floe.key"
	PropRawValue = "floe.raw-value"
	PropEnvelope = "floe.envelope"
)

// Layout is how a table's columns hold records: floe's metadata columns,
// the kafka_key column by key mode, and the value as one binary column (raw)
// or as typed top-level columns beside the metadata columns (json,
// registry), added to the table as records show them.
type Layout struct {
	Value ValueMode
	Key   KeyMode
	// RawValue keeps the value bytes in the binary column value beside the
	// typed columns. It is always set in raw mode.
	RawValue bool
	// Envelope is how the value carries the row: the value itself
	// (EnvelopeNone), or a Debezium change event whose after image is the
	// row (EnvelopeDebezium: typed values and keys only).
	Envelope Envelope
}

// RawLayout is floe's layout before typed tables: every table without
// layout properties has it.
var RawLayout = Layout{Value: ValueRaw, Key: KeyRaw, RawValue: true}

// Typed reports whether values are decoded into columns.
func (l Layout) Typed() bool { return l.Value != ValueRaw }

// TypedKey reports whether keys are decoded into a struct.
func (l Layout) TypedKey() bool { return l.Key == KeyJSON || l.Key == KeyRegistry }

// UsesRegistry reports whether values or keys are decoded with a schema
// registry.
func (l Layout) UsesRegistry() bool { return l.Value == ValueRegistry || l.Key == KeyRegistry }

// Normalize fills in defaults (raw value and key) and checks the modes.
func (l *Layout) Normalize() error {
	if l.Value == "" {
		l.Value = ValueRaw
	}
	if l.Key == "" {
		l.Key = KeyRaw
	}
	switch l.Value {
	case ValueRaw:
		l.RawValue = true
	case ValueJSON, ValueRegistry:
	default:
		return &LayoutError{Setting: "value", Value: string(l.Value), Want: "raw, json or registry"}
	}
	switch l.Key {
	case KeyRaw, KeyString, KeyJSON, KeyRegistry:
	default:
		return &LayoutError{Setting: "key", Value: string(l.Key), Want: "raw, string, json or registry"}
	}
	switch l.Envelope {
	case EnvelopeNone:
	case EnvelopeDebezium:
		// Debezium's converters write a struct key and a struct event: a
		// raw or string layout would keep neither the columns nor the key.
		if !l.Typed() {
			return &LayoutError{Setting: "value", Value: string(l.Value), Want: "json or registry with --envelope debezium (the converter Debezium writes its events with)"}
		}
		if !l.TypedKey() {
			return &LayoutError{Setting: "key", Value: string(l.Key), Want: "json or registry with --envelope debezium (Debezium's key is the primary key struct, written by the key converter)"}
		}
	default:
		return &LayoutError{Setting: "envelope", Value: string(l.Envelope), Want: "none or debezium"}
	}
	return nil
}

// SettingRawValues is the LayoutError setting of keeping raw values.
const SettingRawValues = "raw values"

// LayoutError reports a layout setting that is not valid, or a table whose
// recorded layout is not the one asked for.
type LayoutError struct {
	Setting, Value, Want string
	// Table is set when the table was created with another layout; Empty
	// when that table holds no rows (dropping it loses nothing).
	Table string
	Empty bool
}

func (e *LayoutError) Error() string {
	if e.Table != "" && e.Setting == SettingRawValues {
		return fmt.Sprintf("table %s does not keep the values' bytes (%s): a table keeps the layout it was created with; sink into a new table to keep them", e.Table, ColRawValue)
	}
	if e.Table != "" {
		flag := map[string]string{"values": "--value", "keys": "--key", "envelope": "--envelope"}[e.Setting]
		drop := ""
		if e.Empty {
			drop = "; " + DropEmptyTable(e.Table)
		}
		if e.Setting == "envelope" && e.Want == EnvelopeNone.String() {
			// Change events into a table of plain records: its own
			// --envelope none would write them as plain records, so the
			// fix is another table, or this one dropped.
			if !e.Empty {
				drop = fmt.Sprintf(", or floe drop --table %s --yes removes it (its rows and dead letters with it) and the next run creates it with the flags given", e.Table)
			}
			return fmt.Sprintf("table %s keeps its envelope as %s, not %s (a table keeps the envelope it was created with: sink the %s records into a new table, --table NEW%s)", e.Table, e.Want, e.Value, e.Value, drop)
		}
		return fmt.Sprintf("table %s keeps its %s as %s, not %s (a table keeps the layout it was created with: pass %s %s to write into it, or sink into a new table%s)", e.Table, e.Setting, e.Want, e.Value, flag, e.Want, drop)
	}
	return fmt.Sprintf("%s mode %q: want %s", e.Setting, e.Value, e.Want)
}

// DropEmptyTable is the way out of a refusal by table, which holds no
// rows: most likely made by a run with the wrong flags, it loses nothing
// when dropped, where a new table would leave it behind.
func DropEmptyTable(table string) string {
	return fmt.Sprintf("it holds no rows: floe drop --table %s --yes removes it (and its dead letters), and the next run creates it with the flags given", table)
}

// Properties returns the table properties that record l (the envelope
// only when there is one: a table without PropEnvelope has none).
func (l Layout) Properties() map[string]string {
	props := map[string]string{PropValue: string(l.Value), PropKey: string(l.Key), PropRawValue: fmt.Sprint(l.RawValue)}
	if l.Envelope != EnvelopeNone {
		props[PropEnvelope] = string(l.Envelope)
	}
	return props
}

// LayoutOf returns the layout a table's properties record (RawLayout when
// they record none: a table of a floe before typed tables).
func LayoutOf(props iceberg.Properties) (Layout, error) {
	if props[PropValue] == "" && props[PropKey] == "" {
		return RawLayout, nil
	}
	l := Layout{Value: ValueMode(props[PropValue]), Key: KeyMode(props[PropKey]), RawValue: props[PropRawValue] == "true", Envelope: Envelope(props[PropEnvelope])}
	if err := l.Normalize(); err != nil {
		return l, fmt.Errorf("table property: %w", err)
	}
	return l, nil
}

// IsMetadataColumn reports whether name is one of floe's own columns
// (kafka_*, and value in the raw layout): a value field of that name cannot
// become a column.
func (l Layout) IsMetadataColumn(name string) bool {
	return slices.Contains(metadataColumns, name) || (!l.Typed() && name == ColValue)
}

// RawValueColumn is the name of the column that keeps the value bytes:
// value in the raw layout, kafka_value beside typed columns (where value
// may be a decoded column); "" when the layout does not keep them.
func (l Layout) RawValueColumn() string {
	switch {
	case !l.RawValue:
		return ""
	case l.Typed():
		return ColRawValue
	}
	return ColValue
}

// Schema returns the columns a table of layout l starts with: the
// metadata columns, kafka_key as binary or string (a decoded key's struct
// column is added with the first key), and value (binary) when the raw
// value is kept. Typed value columns are added as records show them.
func (l Layout) Schema() *iceberg.Schema {
	base := Schema()
	var fields []iceberg.NestedField
	for _, f := range base.Fields() {
		switch {
		case f.Name == ColKey && l.TypedKey():
			continue
		case f.Name == ColKey && l.Key == KeyString:
			f.Type = iceberg.PrimitiveTypes.String
			f.Doc = "record key as UTF-8 text; null when the record has no key"
		case f.Name == ColValue && !l.RawValue:
			continue
		case f.Name == ColValue && l.Typed():
			f.Name = ColRawValue
			f.Doc = "record value as written by the producer, beside its decoded columns; null for a tombstone"
		}
		fields = append(fields, f)
	}
	return iceberg.NewSchema(0, fields...)
}

// Check reports whether an existing table's schema can hold rows of layout
// l: the columns Schema gives must exist with the same types (a typed key
// struct, when the table has one, is checked when keys are decoded), and
// typed columns must be optional.
func (l Layout) Check(got *iceberg.Schema) error {
	want := l.Schema()
	var (
		missing MissingColumnsError
		bad     error
	)
	for _, w := range want.Fields() {
		g, ok := got.FindFieldByName(w.Name)
		switch {
		case !ok:
			missing.Columns = append(missing.Columns, w)
		case bad != nil:
		case !sameType(g.Type, w.Type):
			bad = fmt.Errorf("column %q has type %s, floe writes %s", w.Name, g.Type, w.Type)
		case g.Required && !w.Required && !isIdentifier(got, g):
			bad = fmt.Errorf("column %q is required, but floe writes nulls into it", w.Name)
		}
	}
	if len(missing.Columns) > 0 {
		// All of them at once: naming one a run makes a fix per run.
		return &missing
	}
	if bad != nil {
		return bad
	}
	for _, g := range got.Fields() {
		if _, ok := want.FindFieldByName(g.Name); !ok && g.Required && !isIdentifier(got, g) {
			return fmt.Errorf("column %q is required and floe does not write it (make it optional)", g.Name)
		}
	}
	return nil
}

// MissingColumnsError is Check's error for a table that lacks floe's
// columns: a table another tool created, most often.
type MissingColumnsError struct {
	// Columns are the missing columns, as floe creates them.
	Columns []iceberg.NestedField
}

func (e *MissingColumnsError) Error() string {
	cols := make([]string, len(e.Columns))
	for i, c := range e.Columns {
		cols[i] = c.Name + " " + typeString(c.Type)
	}
	return "it lacks floe's columns " + strings.Join(cols, ", ") +
		": add them with these Iceberg types (the columns may be optional; what is nested must be as given)"
}

// typeString writes t as an Iceberg type, with the nullability floe
// requires of a list's elements and a struct's fields: engines' DDL
// differs, and a headers column whose elements may be null is not floe's.
func typeString(t iceberg.Type) string {
	switch t := t.(type) {
	case *iceberg.ListType:
		e := typeString(t.Element)
		if t.ElementRequired {
			e += " not null"
		}
		return "list<" + e + ">"
	case *iceberg.StructType:
		fs := make([]string, len(t.FieldList))
		for i, f := range t.FieldList {
			fs[i] = f.Name + ": " + typeString(f.Type)
			if f.Required {
				fs[i] += " not null"
			}
		}
		return "struct<" + strings.Join(fs, ", ") + ">"
	}
	return t.String()
}

// isIdentifier reports whether f is one of s's identifier fields: the key
// columns of an upsert table, required, which floe never writes null (a
// record without a key is a dead letter).
func isIdentifier(s *iceberg.Schema, f iceberg.NestedField) bool {
	return slices.Contains(s.IdentifierFieldIDs, f.ID)
}

// ValueColumns returns the table's typed value columns: its top-level
// columns that are not floe's own (nil in raw mode, where extra columns are
// users' own and floe does not write them).
func (l Layout) ValueColumns(s *iceberg.Schema) *iceberg.StructType {
	st := &iceberg.StructType{}
	if !l.Typed() {
		return st
	}
	for _, f := range s.Fields() {
		if !l.IsMetadataColumn(f.Name) {
			st.FieldList = append(st.FieldList, f)
		}
	}
	return st
}

// KeyType returns the table's kafka_key column type, nil when the table
// has none yet (a decoded key's struct before the first key).
func KeyType(s *iceberg.Schema) iceberg.Type {
	if f, ok := s.FindFieldByName(ColKey); ok {
		return f.Type
	}
	return nil
}

// ArrowSchema returns the Arrow schema of the rows floe writes into a table
// of layout l whose Iceberg schema is tableSchema, with the table's own
// field IDs (the Parquet writer matches columns by ID). In raw mode only
// floe's columns, in floe's order (extra columns are users' own); in typed
// modes every column.
func (l Layout) ArrowSchema(tableSchema *iceberg.Schema) (*arrow.Schema, error) {
	if !l.Typed() && l.Key == KeyRaw {
		return ArrowSchema(tableSchema)
	}
	proj := tableSchema
	if !l.Typed() {
		names := make([]string, 0, len(l.Schema().Fields()))
		for _, f := range l.Schema().Fields() {
			names = append(names, f.Name)
		}
		var err error
		if proj, err = tableSchema.Select(true, names...); err != nil {
			return nil, fmt.Errorf("project table schema onto floe columns: %w", err)
		}
	}
	sc, err := table.SchemaToArrowSchema(proj, nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("convert the table schema to arrow: %w", err)
	}
	return sc, nil
}

// WriterSchema returns the schema a writer builds rows with: the columns
// of a new table (Schema), kafka_key of type key when the key is decoded
// (nil: none seen yet), and the value columns. Its field IDs are
// placeholders: a commit matches columns by name and the table assigns IDs
// to the columns it adds (snapshot.Flush.Schema).
func (l Layout) WriterSchema(key iceberg.Type, values *iceberg.StructType) *iceberg.Schema {
	fields := slices.Clone(l.Schema().Fields())
	if l.TypedKey() && key != nil {
		fields = slices.Insert(fields, slices.IndexFunc(fields, func(f iceberg.NestedField) bool { return f.Name == ColHeaders }),
			iceberg.NestedField{Name: ColKey, Type: key, Doc: "record key, decoded; null when the record has no key"})
	}
	for _, f := range values.FieldList {
		f.Required = false
		fields = append(fields, f)
	}
	// Placeholder IDs, unique across the schema: the catalog's own IDs of
	// the existing columns do not matter to a writer that matches by name.
	next := 1
	for i := range fields {
		fields[i].ID = next
		next++
		fields[i].Type = renumber(fields[i].Type, &next)
	}
	return iceberg.NewSchema(0, fields...)
}

// renumber gives the fields, elements, keys and values nested in t fresh
// IDs from *next.
func renumber(t iceberg.Type, next *int) iceberg.Type {
	take := func() int { id := *next; *next++; return id }
	switch t := t.(type) {
	case *iceberg.StructType:
		out := &iceberg.StructType{FieldList: slices.Clone(t.FieldList)}
		for i := range out.FieldList {
			out.FieldList[i].ID = take()
			out.FieldList[i].Type = renumber(out.FieldList[i].Type, next)
		}
		return out
	case *iceberg.ListType:
		out := *t
		out.ElementID = take()
		out.Element = renumber(t.Element, next)
		return &out
	case *iceberg.MapType:
		out := *t
		out.KeyID, out.ValueID = take(), take()
		out.KeyType, out.ValueType = renumber(t.KeyType, next), renumber(t.ValueType, next)
		return &out
	}
	return t
}

// WriterArrowSchema is the Arrow schema of rows built for a writer schema:
// without field IDs, since a commit matches columns by name.
func WriterArrowSchema(s *iceberg.Schema) (*arrow.Schema, error) {
	sc, err := table.SchemaToArrowSchema(s, nil, false, false)
	if err != nil {
		return nil, fmt.Errorf("convert the writer schema to arrow: %w", err)
	}
	return sc, nil
}
