package mapping

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
)

// SchemaConflictError reports a decoded value whose type the table cannot
// take, even by evolving its schema: a type Iceberg cannot promote the
// column to (narrowing, string to int, long to double), or a field whose
// kind changed (a struct where a list was). The record goes to the
// dead-letter table with it as the reason, or, with --on-schema-conflict
// fail, stops the sink.
type SchemaConflictError struct {
	// Path names the field, dotted from the top-level column.
	Path      string
	Have, Got iceberg.Type
	// Cause, when set, says how the column came to have its type and what
	// to do about it.
	Cause string
	// KeyColumn is set for a key column of an upsert table, which keeps
	// its type where Iceberg would widen it (KeepKeyType); Value is the
	// value that does not fit it.
	KeyColumn bool
	Value     any
	// SameNameAs, when set, names the field of the table (or of the new
	// value) whose dotted name the field at Path also has: "a.b" beside
	// field b of struct a. iceberg-go indexes fields by those names and
	// refuses a schema where two share one.
	SameNameAs string
}

// schemaConflictMark and nameConflictMark are the parts of every
// SchemaConflictError's message that IsSchemaConflictReason looks for.
const (
	schemaConflictMark = ": the table's type "
	nameConflictMark   = ": the table's schema already has a field of that dotted name, "
)

// IsSchemaConflictReason reports whether reason, a dead letter's error
// column (or a message quoting one), says a schema conflict (a
// SchemaConflictError): the record decoded, but the table's column cannot
// take its value.
func IsSchemaConflictReason(reason string) bool {
	return (strings.Contains(reason, schemaConflictMark) || strings.Contains(reason, nameConflictMark)) && strings.Contains(reason, "field ")
}

func (e *SchemaConflictError) Error() string {
	if e.SameNameAs != "" {
		return fmt.Sprintf("field %s"+nameConflictMark+"%s: Iceberg names a nested field by its path joined with dots, so it cannot hold both; rename one of them in the producer",
			e.Path, e.SameNameAs)
	}
	msg := fmt.Sprintf("field %s"+schemaConflictMark+"%s cannot take a value of type %s (Iceberg allows only adding optional fields and widening int to long, float to double and a decimal's precision)",
		e.Path, e.Have, e.Got)
	if e.KeyColumn {
		msg = fmt.Sprintf("field %s"+schemaConflictMark+"%s cannot take the value %v of type %s: an upsert table keeps the types of its key columns (the equality deletes of a widened one would not reach the rows written before), and the value does not fit",
			e.Path, e.Have, e.Value, e.Got)
	}
	if e.Cause != "" {
		msg += "; " + e.Cause
	}
	return msg
}

// MergeType returns the type that holds values of both have (a column or
// field of the table) and in (the type of newly decoded values), and
// whether it differs from have: the schema evolution the table needs before
// it takes the new values. The changes are the ones Iceberg allows: a
// struct gains the fields it lacked (always optional, so that older rows
// read as null), int widens to long, float to double, and a decimal to a
// larger precision of the same scale. A field that in lacks keeps its
// column: rows of the new type hold null there. Anything else is a
// *SchemaConflictError.
//
// Field IDs of in are ignored; new fields keep in's IDs as placeholders,
// and the table assigns real ones when it commits the change.
func MergeType(path string, have, in iceberg.Type) (iceberg.Type, bool, error) {
	conflict := func() (iceberg.Type, bool, error) {
		return have, false, &SchemaConflictError{Path: path, Have: have, Got: in}
	}
	switch h := have.(type) {
	case *iceberg.StructType:
		i, ok := in.(*iceberg.StructType)
		if !ok {
			return conflict()
		}
		out := &iceberg.StructType{FieldList: make([]iceberg.NestedField, 0, len(h.FieldList))}
		changed := false
		for _, f := range h.FieldList {
			g, ok := FindField(i, f.Name)
			if !ok {
				out.FieldList = append(out.FieldList, f)
				continue
			}
			t, c, err := MergeType(joinPath(path, f.Name), f.Type, g.Type)
			if err != nil {
				return have, false, err
			}
			f.Type = t
			out.FieldList = append(out.FieldList, f)
			changed = changed || c
		}
		for _, g := range i.FieldList {
			if _, ok := FindField(h, g.Name); !ok {
				g.Required = false
				out.FieldList = append(out.FieldList, g)
				changed = true
			}
		}
		if !changed {
			return have, false, nil
		}
		if path == "" {
			if field, other, ok := nameClash(out); ok {
				return have, false, &SchemaConflictError{Path: field, Have: have, Got: in, SameNameAs: other}
			}
		}
		return out, true, nil
	case *iceberg.ListType:
		i, ok := in.(*iceberg.ListType)
		if !ok {
			return conflict()
		}
		t, c, err := MergeType(joinPath(path, "element"), h.Element, i.Element)
		if err != nil || !c {
			return have, false, err
		}
		out := *h
		out.Element = t
		return &out, true, nil
	case *iceberg.MapType:
		i, ok := in.(*iceberg.MapType)
		if !ok || !h.KeyType.Equals(i.KeyType) {
			return conflict()
		}
		t, c, err := MergeType(joinPath(path, "value"), h.ValueType, i.ValueType)
		if err != nil || !c {
			return have, false, err
		}
		out := *h
		out.ValueType = t
		return &out, true, nil
	case iceberg.Int32Type:
		switch in.(type) {
		case iceberg.Int32Type:
			return have, false, nil
		case iceberg.Int64Type:
			return iceberg.PrimitiveTypes.Int64, true, nil
		}
		return conflict()
	case iceberg.Int64Type:
		switch in.(type) {
		case iceberg.Int32Type, iceberg.Int64Type:
			return have, false, nil
		}
		return conflict()
	case iceberg.Float32Type:
		switch in.(type) {
		case iceberg.Float32Type:
			return have, false, nil
		case iceberg.Float64Type:
			return iceberg.PrimitiveTypes.Float64, true, nil
		}
		return conflict()
	case iceberg.Float64Type:
		switch in.(type) {
		case iceberg.Float32Type, iceberg.Float64Type:
			return have, false, nil
		}
		return conflict()
	case iceberg.DecimalType:
		i, ok := in.(iceberg.DecimalType)
		if !ok || i.Scale() != h.Scale() {
			return conflict()
		}
		if i.Precision() <= h.Precision() {
			return have, false, nil
		}
		return iceberg.DecimalTypeOf(i.Precision(), h.Scale()), true, nil
	}
	if have.Equals(in) {
		return have, false, nil
	}
	return conflict()
}

// FindField returns the field of st named name (exact case, as Iceberg names are).
func FindField(st *iceberg.StructType, name string) (iceberg.NestedField, bool) {
	for _, f := range st.FieldList {
		if f.Name == name {
			return f, true
		}
	}
	return iceberg.NestedField{}, false
}

// KeepKeyType returns v, a value of type got decoded for a key column of
// an upsert table whose type is have, as a value of type have: an upsert
// table's key columns are never widened. iceberg-go v0.7.0 compares an
// equality delete's key with a data file's column as the file stores it,
// so the deletes of a key column widened from int to long (a Debezium
// source's ALTER of its primary key) would not reach the rows written
// before the change, in floe's reads, audit and compaction alike: the
// updates and deletes of older keys would be lost. A value that does not
// fit have (a long beyond int's range, a decimal with more digits) is a
// *SchemaConflictError. The value decides, so got may be have when the
// value's own type is not known (a delete's before image).
func KeepKeyType(path string, have, got iceberg.Type, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	conflict := &SchemaConflictError{Path: path, Have: have, Got: got, KeyColumn: true, Value: v,
		Cause: "a new table whose first records have the wider type takes it: for a Debezium source, snapshot the source table again into a new topic and sink that (docs/upsert.md, key column types)"}
	switch have := have.(type) {
	case iceberg.Int32Type:
		switch v := v.(type) {
		case int32:
			return v, nil
		case int64:
			if v >= math.MinInt32 && v <= math.MaxInt32 {
				return int32(v), nil
			}
		}
	case iceberg.DecimalType:
		if d, ok := v.(iceberg.Decimal); ok && d.Scale == have.Scale() && digits(d.Val) <= have.Precision() {
			return d, nil
		}
	default:
		if have.Equals(got) {
			return v, nil
		}
	}
	return nil, conflict
}

// nameClash looks, among floe's own columns and the value columns of t,
// for two fields with the same dotted name, as iceberg-go names them: the
// path joined with dots, list elements and map entries named "element",
// "key" and "value" (full names), and also without them (short names). It
// returns the second field's path and the first's, each as its segments
// quoted and joined with " > " ("a.b" against "a" > "b").
func nameClash(t *iceberg.StructType) (field, other string, ok bool) {
	full, short := map[string]string{}, map[string]string{}
	var walk func(fullPrefix, shortPrefix, shown string, typ iceberg.Type) bool
	visit := func(fullPrefix, shortPrefix, shown, name string, typ iceberg.Type, nested bool) bool {
		f, s := joinPath(fullPrefix, name), joinPath(shortPrefix, name)
		if !nested {
			s = shortPrefix
		}
		show := strconv.Quote(name)
		if shown != "" {
			show = shown + " > " + show
		}
		if prev, dup := full[f]; dup {
			field, other, ok = show, prev, true
			return false
		}
		if prev, dup := short[f]; dup {
			field, other, ok = show, prev, true
			return false
		}
		if prev, dup := full[s]; dup && nested {
			field, other, ok = show, prev, true
			return false
		}
		full[f] = show
		if nested {
			short[s] = show
		}
		return walk(f, s, show, typ)
	}
	walk = func(fullPrefix, shortPrefix, shown string, typ iceberg.Type) bool {
		switch c := typ.(type) {
		case *iceberg.StructType:
			for _, fl := range c.FieldList {
				if !visit(fullPrefix, shortPrefix, shown, fl.Name, fl.Type, true) {
					return false
				}
			}
		case *iceberg.ListType:
			return visit(fullPrefix, shortPrefix, shown, "element", c.Element, false)
		case *iceberg.MapType:
			return visit(fullPrefix, shortPrefix, shown, "key", c.KeyType, false) &&
				visit(fullPrefix, shortPrefix, shown, "value", c.ValueType, false)
		}
		return true
	}
	// floe's own nested column (kafka_headers): the others are primitive,
	// their names reserved (checkColumnNames), and a typed table may call
	// its value column value.
	own := slices.DeleteFunc(Schema().Fields(), func(f iceberg.NestedField) bool {
		_, nested := f.Type.(iceberg.NestedType)
		return !nested
	})
	walk("", "", "", &iceberg.StructType{FieldList: slices.Concat(own, t.FieldList)})
	return field, other, ok
}

// DecimalsAsDoubles returns in with each decimal field that have holds as
// a double (at the same path) made a double. A table a floe before made of
// a JSON Schema Kafka Connect Decimal (which it read as a double) keeps
// its double column, which takes such values as it did (decimalFloat);
// only JSON Schema values are read so (a decimal of another schema into a
// double column stays a conflict). in is returned as is when nothing
// changes.
func DecimalsAsDoubles(have, in iceberg.Type) iceberg.Type {
	h, ok1 := have.(*iceberg.StructType)
	i, ok2 := in.(*iceberg.StructType)
	if !ok1 || !ok2 {
		return in
	}
	var out *iceberg.StructType
	for n, f := range i.FieldList {
		g, ok := FindField(h, f.Name)
		if !ok {
			continue
		}
		t := f.Type
		switch f.Type.(type) {
		case iceberg.DecimalType:
			if _, double := g.Type.(iceberg.Float64Type); double {
				t = iceberg.PrimitiveTypes.Float64
			}
		case *iceberg.StructType:
			t = DecimalsAsDoubles(g.Type, f.Type)
		}
		if t != f.Type {
			if out == nil {
				out = &iceberg.StructType{FieldList: slices.Clone(i.FieldList)}
			}
			out.FieldList[n].Type = t
		}
	}
	if out == nil {
		return in
	}
	return out
}

// decimalFloat is the double nearest the decimal n×10^-scale, as
// strconv.ParseFloat gives it of the decimal's text (decimal128's
// ToFloat64 multiplies by a rounded power of ten: 0.57 became
// 0.5700000000000001).
func decimalFloat(n decimal128.Num, scale int32) float64 {
	f, _ := strconv.ParseFloat(n.ToString(scale), 64)
	return f
}
