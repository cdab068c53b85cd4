package mapping

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// Decoded values. A record key or value decoded from JSON, Avro, Protobuf
// or JSON Schema is a tree of Go values in one canonical representation per
// Iceberg type, whatever the format it came from:
//
//	boolean            bool
//	int                int32
//	long               int64
//	float              float32
//	double             float64
//	decimal(P, S)      iceberg.Decimal (its Scale is S)
//	date               iceberg.Date (days since 1970-01-01)
//	time               iceberg.Time (microseconds since midnight)
//	timestamp(tz)      iceberg.Timestamp (microseconds since the epoch, UTC)
//	string             string
//	uuid               uuid.UUID
//	fixed(L), binary   []byte
//	struct             map[string]any, by field name; a missing field is null
//	list               []any
//	map                []MapEntry
//
// and nil for null. Decoders produce it; CheckValue validates it against a
// table's type, and AppendValue writes it into Arrow builders of that type.
// A value of a narrower type than the column's (an int into a long, a float
// into a double, a decimal of smaller precision) is accepted: those are the
// promotions Iceberg allows, so a column keeps accepting old records after
// its type was widened.

// MapEntry is one entry of a decoded map.
type MapEntry struct {
	Key, Value any
}

// TypeError reports a decoded value that does not fit a column's type: the
// record goes to the dead-letter table with it as the reason.
type TypeError struct {
	// Path names the field, dotted from the top-level column ("order.items.element.price").
	Path string
	Want iceberg.Type
	// Got describes the value found.
	Got string
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("field %s: %s does not fit column type %s", e.Path, e.Got, e.Want)
}

// describe names a value's Go representation for messages.
func describe(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "a struct"
	case []any:
		return "a list"
	case []MapEntry:
		return "a map"
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return fmt.Sprintf("string %q", v)
	}
	return fmt.Sprintf("%T %v", v, v)
}

// CheckValue reports whether v (canonical representation) fits type t, a
// column or field of the table, path naming it. required says whether null
// is refused. Nothing is appended: a record is checked whole before any of
// it reaches a builder, so that a bad field never leaves a row half
// written.
func CheckValue(path string, t iceberg.Type, required bool, v any) error {
	bad := func() error { return &TypeError{Path: path, Want: t, Got: describe(v)} }
	if v == nil {
		if required {
			return &TypeError{Path: path, Want: t, Got: "null (the column is required)"}
		}
		return nil
	}
	switch t := t.(type) {
	case iceberg.BooleanType:
		if _, ok := v.(bool); !ok {
			return bad()
		}
	case iceberg.Int32Type:
		if _, ok := v.(int32); !ok {
			return bad()
		}
	case iceberg.Int64Type:
		switch v.(type) {
		case int64, int32:
		default:
			return bad()
		}
	case iceberg.Float32Type:
		if _, ok := v.(float32); !ok {
			return bad()
		}
	case iceberg.Float64Type:
		switch v.(type) {
		case float64, float32:
		default:
			return bad()
		}
	case iceberg.DecimalType:
		d, ok := v.(iceberg.Decimal)
		if !ok || d.Scale != t.Scale() {
			return bad()
		}
		if digits(d.Val) > t.Precision() {
			return &TypeError{Path: path, Want: t, Got: fmt.Sprintf("decimal of %d digits", digits(d.Val))}
		}
	case iceberg.DateType:
		if _, ok := v.(iceberg.Date); !ok {
			return bad()
		}
	case iceberg.TimeType:
		if _, ok := v.(iceberg.Time); !ok {
			return bad()
		}
	case iceberg.TimestampType, iceberg.TimestampTzType:
		if _, ok := v.(iceberg.Timestamp); !ok {
			return bad()
		}
	case iceberg.StringType:
		if _, ok := v.(string); !ok {
			return bad()
		}
	case iceberg.UUIDType:
		if _, ok := v.(uuid.UUID); !ok {
			return bad()
		}
	case iceberg.FixedType:
		b, ok := v.([]byte)
		if !ok || len(b) != t.Len() {
			return bad()
		}
	case iceberg.BinaryType:
		if _, ok := v.([]byte); !ok {
			return bad()
		}
	case *iceberg.StructType:
		m, ok := v.(map[string]any)
		if !ok {
			return bad()
		}
		for name := range m {
			if !slices.ContainsFunc(t.FieldList, func(f iceberg.NestedField) bool { return f.Name == name }) {
				return &TypeError{Path: path + "." + name, Want: t, Got: "a field the struct does not have"}
			}
		}
		for _, f := range t.FieldList {
			if err := CheckValue(joinPath(path, f.Name), f.Type, f.Required, m[f.Name]); err != nil {
				return err
			}
		}
	case *iceberg.ListType:
		l, ok := v.([]any)
		if !ok {
			return bad()
		}
		for _, e := range l {
			if err := CheckValue(joinPath(path, "element"), t.Element, t.ElementRequired, e); err != nil {
				return err
			}
		}
	case *iceberg.MapType:
		m, ok := v.([]MapEntry)
		if !ok {
			return bad()
		}
		for _, e := range m {
			if err := CheckValue(joinPath(path, "key"), t.KeyType, true, e.Key); err != nil {
				return err
			}
			if err := CheckValue(joinPath(path, "value"), t.ValueType, t.ValueRequired, e.Value); err != nil {
				return err
			}
		}
	default:
		return &TypeError{Path: path, Want: t, Got: "a type floe does not write"}
	}
	return nil
}

// digits returns the number of decimal digits of an unscaled decimal.
func digits(n decimal128.Num) int {
	s := n.BigInt().String()
	if s[0] == '-' {
		s = s[1:]
	}
	if s == "0" {
		return 1
	}
	return len(s)
}

// errUnsupportedBuilder reports an Arrow builder AppendValue cannot fill.
var errUnsupportedBuilder = errors.New("unsupported arrow builder")

// AppendValue appends v, which CheckValue accepted for the builder's
// column type, to b. Builders come from the Arrow schema of the table's
// Iceberg schema (table.SchemaToArrowSchema), so the Arrow type decides how
// each canonical value is written; the only error is a builder of a type
// floe never writes.
func AppendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	switch b := b.(type) {
	case *array.BooleanBuilder:
		b.Append(v.(bool))
	case *array.Int32Builder:
		b.Append(v.(int32))
	case *array.Int64Builder:
		switch v := v.(type) {
		case int64:
			b.Append(v)
		case int32:
			b.Append(int64(v))
		}
	case *array.Float32Builder:
		b.Append(v.(float32))
	case *array.Float64Builder:
		switch v := v.(type) {
		case float64:
			b.Append(v)
		case float32:
			b.Append(float64(v))
		case iceberg.Decimal: // into a double column made before (DecimalsAsDoubles)
			b.Append(decimalFloat(v.Val, int32(v.Scale)))
		}
	case *array.Decimal128Builder:
		b.Append(v.(iceberg.Decimal).Val)
	case *array.Date32Builder:
		b.Append(arrow.Date32(v.(iceberg.Date)))
	case *array.Time64Builder:
		b.Append(arrow.Time64(v.(iceberg.Time)))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(v.(iceberg.Timestamp)))
	case *array.StringBuilder:
		b.Append(v.(string))
	case *array.LargeStringBuilder:
		b.Append(v.(string))
	case *extensions.UUIDBuilder:
		b.Append(v.(uuid.UUID))
	case *array.FixedSizeBinaryBuilder:
		b.Append(v.([]byte))
	case *array.BinaryBuilder:
		b.Append(v.([]byte))
	case *array.StructBuilder:
		m := v.(map[string]any)
		b.Append(true)
		st := b.Type().(*arrow.StructType)
		for i, f := range st.Fields() {
			if err := AppendValue(b.FieldBuilder(i), m[f.Name]); err != nil {
				return err
			}
		}
	case *array.ListBuilder:
		b.Append(true)
		for _, e := range v.([]any) {
			if err := AppendValue(b.ValueBuilder(), e); err != nil {
				return err
			}
		}
	case *array.MapBuilder:
		b.Append(true)
		for _, e := range v.([]MapEntry) {
			if err := AppendValue(b.KeyBuilder(), e.Key); err != nil {
				return err
			}
			if err := AppendValue(b.ItemBuilder(), e.Value); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("%w %T", errUnsupportedBuilder, b)
	}
	return nil
}

// TimestampOf converts a time into the canonical timestamp representation.
func TimestampOf(t time.Time) iceberg.Timestamp { return iceberg.Timestamp(t.UnixMicro()) }

// DecimalOf returns the canonical decimal of an unscaled integer and a
// scale, and false when it does not fit 38 digits.
func DecimalOf(unscaled *big.Int, scale int) (iceberg.Decimal, bool) {
	if len(new(big.Int).Abs(unscaled).String()) > 38 {
		return iceberg.Decimal{}, false
	}
	return iceberg.Decimal{Val: decimal128.FromBigInt(unscaled), Scale: scale}, true
}
