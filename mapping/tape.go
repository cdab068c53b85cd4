package mapping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The fast path of typed rows. Decode builds the canonical representation
// (typed.go): a map per struct, an interface value per field, a copy of
// every string. That is what the content audit wants, but a sink only
// copies the tree into Arrow builders and drops it, and at hundreds of
// thousands of records a second the garbage costs more than the decoding.
// A TapeCodec can instead decode a payload onto a Tape: the value
// flattened in the order of the codec's type, unboxed, strings and bytes
// aliasing the payload. A ValueAppender, compiled once per codec type and
// writer schema, walks the tape into the value columns' builders.
//
// Decoding first and appending second keeps the property the slow path
// has: a payload that cannot be decoded fails before anything reaches a
// builder (Arrow builders cannot take a value back), so it leaves no
// partial row, and the record can go to the dead-letter table.

// slot is one value on a tape. Every value, whatever its type, starts with
// exactly one slot; null is a slot with null set and nothing after it. By
// type:
//
//	boolean                 i: 0 or 1
//	int, long               i
//	float, double           i: the IEEE 754 bits (float: the low 32)
//	date, time, timestamp   i: the canonical unit (days, microseconds)
//	decimal                 i: the low 64 bits, j: the high 64 bits, of the unscaled value
//	uuid                    i: the first 8 bytes, j: the last 8, big-endian
//	string, binary, fixed   b (aliasing the payload; strings are valid UTF-8)
//	struct                  a slot, then one value per field, in the type's order
//	list                    i: the element count, then the elements
//	map                     i: the entry count, then key and value of each entry
type slot struct {
	i, j int64
	b    []byte
	null bool
}

// Tape holds one decoded value between decoding and appending it. The zero
// value is ready; reusing one tape from record to record keeps its slots.
// A tape aliases the payload it was decoded from, so the payload must stay
// as it is until the tape is appended.
type Tape struct {
	slots []slot
	pos   int // the next slot to read
}

func (t *Tape) reset() {
	clear(t.slots) // drop the references into the previous payload
	t.slots = t.slots[:0]
	t.pos = 0
}

// next returns the next slot to read and moves past it.
func (t *Tape) next() *slot {
	s := &t.slots[t.pos]
	t.pos++
	return s
}

func (t *Tape) pushNull()             { t.slots = append(t.slots, slot{null: true}) }
func (t *Tape) pushInt(v int64)       { t.slots = append(t.slots, slot{i: v}) }
func (t *Tape) pushPair(lo, hi int64) { t.slots = append(t.slots, slot{i: lo, j: hi}) }
func (t *Tape) pushBytes(b []byte)    { t.slots = append(t.slots, slot{b: b}) }

// pushCount pushes a list's or map's count slot, to be set when the
// entries have been read (setCount).
func (t *Tape) pushCount() int {
	t.slots = append(t.slots, slot{})
	return len(t.slots) - 1
}

func (t *Tape) setCount(at int, n int64) { t.slots[at].i = n }

// TapeCodec is a Codec with a fast path: it decodes a payload onto a tape,
// for RowBuilder.AppendTape. A payload DecodeTape refuses is the
// *DecodeError Decode returns for it, word for word, so that a record is a
// dead letter for the same reason whichever path decoded it; and a tape it
// fills holds the value Decode returns.
type TapeCodec interface {
	Codec
	// DecodeTape decodes payload onto t, replacing what t held.
	DecodeTape(payload []byte, t *Tape) error
}

// value reads a value of type typ from the tape, in the canonical
// representation (copying strings and bytes out of the payload): the
// slow path's Decode on top of the fast path's decoding.
func (t *Tape) value(typ iceberg.Type) any {
	s := t.next()
	if s.null {
		return nil
	}
	switch typ := typ.(type) {
	case iceberg.BooleanType:
		return s.i != 0
	case iceberg.Int32Type:
		return int32(s.i)
	case iceberg.Int64Type:
		return s.i
	case iceberg.Float32Type:
		return math.Float32frombits(uint32(s.i))
	case iceberg.Float64Type:
		return math.Float64frombits(uint64(s.i))
	case iceberg.DecimalType:
		return iceberg.Decimal{Val: decimal128.New(s.j, uint64(s.i)), Scale: typ.Scale()}
	case iceberg.DateType:
		return iceberg.Date(s.i)
	case iceberg.TimeType:
		return iceberg.Time(s.i)
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return iceberg.Timestamp(s.i)
	case iceberg.StringType:
		return string(s.b)
	case iceberg.UUIDType:
		return slotUUID(s)
	case iceberg.FixedType, iceberg.BinaryType:
		return append([]byte{}, s.b...)
	case *iceberg.StructType:
		m := make(map[string]any, len(typ.FieldList))
		for _, f := range typ.FieldList {
			if v := t.value(f.Type); v != nil {
				m[f.Name] = v
			}
		}
		return m
	case *iceberg.ListType:
		l := make([]any, 0, s.i)
		for n := s.i; n > 0; n-- {
			l = append(l, t.value(typ.Element))
		}
		return l
	case *iceberg.MapType:
		m := make([]MapEntry, 0, s.i)
		for n := s.i; n > 0; n-- {
			k := t.value(typ.KeyType)
			m = append(m, MapEntry{Key: k, Value: t.value(typ.ValueType)})
		}
		return m
	}
	// A codec only pushes values of the types above (its own Type()).
	panic(fmt.Sprintf("mapping: no tape representation of %s", typ))
}

// slotUUID returns the uuid a slot holds.
func slotUUID(s *slot) uuid.UUID {
	var id uuid.UUID
	binary.BigEndian.PutUint64(id[:8], uint64(s.i))
	binary.BigEndian.PutUint64(id[8:], uint64(s.j))
	return id
}

// ErrNoFastPath says that values of a codec's type cannot be appended from
// a tape to the columns of a row builder (NewValueAppender): a column's
// Arrow type is not one MergeType would have made of the codec's type.
var ErrNoFastPath = errors.New("no fast path")

// ValueAppender appends values decoded onto a tape, of one codec type, to
// the value columns of rows built for one Arrow schema
// (RowBuilder.AppendTape). It is immutable and safe for concurrent use.
type ValueAppender struct {
	schema *arrow.Schema
	// columns holds, per field of the codec's type (or for the one value
	// of a type that is not a struct), the index in the builder's value
	// columns and how to append it; missing the value columns the type has
	// no field for.
	columns []columnAppend
	missing []int
	// wrapped: the type is not a struct; its value is the column value.
	wrapped bool
}

type columnAppend struct {
	col int
	app tapeAppend
}

// tapeAppend appends the value at the tape's position to b, a builder of
// the Arrow type it was compiled for, and moves past it.
type tapeAppend func(b array.Builder, t *Tape)

// NewValueAppender compiles the fast path from tapes of codec type typ
// (Codec.Type) to the value columns of rb, and of every row builder made
// for the same Arrow schema: a writer schema into which MergeType merged
// typ. Columns typ has no field for (added by other schema versions) are
// null in its rows; values of a type narrower than their column's (int
// into long, float into double, a decimal of smaller precision) are
// widened, as AppendValue does. A column that cannot take typ's values is
// ErrNoFastPath, wrapped.
func (rb *RowBuilder) NewValueAppender(typ iceberg.Type) (*ValueAppender, error) {
	va := &ValueAppender{schema: rb.schema}
	index := make(map[string]int, len(rb.columns))
	for i, col := range rb.columns {
		index[col.name] = i
	}
	used := make([]bool, len(rb.columns))
	add := func(name string, t iceberg.Type) error {
		i, ok := index[name]
		if !ok {
			return fmt.Errorf("%w: the rows have no column %s", ErrNoFastPath, name)
		}
		app, err := compileAppend(name, t, rb.columns[i].b.Type())
		if err != nil {
			return err
		}
		va.columns = append(va.columns, columnAppend{col: i, app: app})
		used[i] = true
		return nil
	}
	if st, ok := typ.(*iceberg.StructType); ok {
		for _, f := range st.FieldList {
			if err := add(f.Name, f.Type); err != nil {
				return nil, err
			}
		}
	} else {
		va.wrapped = true
		if err := add(ColValue, typ); err != nil {
			return nil, err
		}
	}
	for i, u := range used {
		if !u {
			va.missing = append(va.missing, i)
		}
	}
	return va, nil
}

// AppendTape adds one record as a row of a typed layout, like
// AppendDecoded: the metadata columns from r, key (canonical) into
// kafka_key, and the value on t (decoded by a TapeCodec whose type va was
// compiled for, for this builder's schema) into the value columns. A null
// value (a union of null and a record, written as null) makes every value
// column null.
func (rb *RowBuilder) AppendTape(r *kgo.Record, key any, va *ValueAppender, t *Tape) error {
	if va.schema != rb.schema {
		return errors.New("row builder: the value appender was compiled for another schema")
	}
	rb.appendMetadata(r)
	if err := rb.appendKey(key); err != nil {
		return err
	}
	t.pos = 0
	if !va.wrapped && t.next().null {
		for _, c := range rb.columns {
			c.b.AppendNull()
		}
		rb.rows++
		return nil
	}
	for _, c := range va.columns {
		c.app(rb.columns[c.col].b, t)
	}
	for _, i := range va.missing {
		rb.columns[i].b.AppendNull()
	}
	rb.rows++
	return nil
}

// compileAppend returns how to append values of Iceberg type in (a codec's
// type, decoded onto a tape) to a builder of Arrow type out (a column or
// field of the writer schema, which MergeType made hold in), path naming
// it.
func compileAppend(path string, in iceberg.Type, out arrow.DataType) (tapeAppend, error) {
	id := out.ID()
	switch in := in.(type) {
	case iceberg.BooleanType:
		if id == arrow.BOOL {
			return appendSlot[*array.BooleanBuilder](func(s *slot) bool { return s.i != 0 }), nil
		}
	case iceberg.Int32Type:
		switch id {
		case arrow.INT32:
			return appendSlot[*array.Int32Builder](func(s *slot) int32 { return int32(s.i) }), nil
		case arrow.INT64: // promoted: the slot holds the int as an int64
			return appendSlot[*array.Int64Builder](slotInt), nil
		}
	case iceberg.Int64Type:
		if id == arrow.INT64 {
			return appendSlot[*array.Int64Builder](slotInt), nil
		}
	case iceberg.Float32Type:
		switch id {
		case arrow.FLOAT32:
			return appendSlot[*array.Float32Builder](func(s *slot) float32 { return math.Float32frombits(uint32(s.i)) }), nil
		case arrow.FLOAT64: // promoted
			return appendSlot[*array.Float64Builder](func(s *slot) float64 { return float64(math.Float32frombits(uint32(s.i))) }), nil
		}
	case iceberg.Float64Type:
		if id == arrow.FLOAT64 {
			return appendSlot[*array.Float64Builder](func(s *slot) float64 { return math.Float64frombits(uint64(s.i)) }), nil
		}
	case iceberg.DecimalType:
		if id == arrow.FLOAT64 {
			// A double column made before (DecimalsAsDoubles).
			scale := int32(in.Scale())
			return appendSlot[*array.Float64Builder](func(s *slot) float64 { return decimalFloat(decimal128.New(s.j, uint64(s.i)), scale) }), nil
		}
		// A wider precision of the same scale holds the same unscaled value.
		if d, ok := out.(*arrow.Decimal128Type); ok && int(d.Scale) == in.Scale() && int(d.Precision) >= in.Precision() {
			return appendSlot[*array.Decimal128Builder](func(s *slot) decimal128.Num { return decimal128.New(s.j, uint64(s.i)) }), nil
		}
	case iceberg.DateType:
		if id == arrow.DATE32 {
			return appendSlot[*array.Date32Builder](func(s *slot) arrow.Date32 { return arrow.Date32(s.i) }), nil
		}
	case iceberg.TimeType:
		if id == arrow.TIME64 {
			return appendSlot[*array.Time64Builder](func(s *slot) arrow.Time64 { return arrow.Time64(s.i) }), nil
		}
	case iceberg.TimestampType, iceberg.TimestampTzType:
		if id == arrow.TIMESTAMP {
			return appendSlot[*array.TimestampBuilder](func(s *slot) arrow.Timestamp { return arrow.Timestamp(s.i) }), nil
		}
	case iceberg.StringType:
		// As bytes, with no copy into a Go string: the codec checked them
		// to be UTF-8.
		switch id {
		case arrow.STRING:
			return appendBytes(func(b array.Builder) *array.BinaryBuilder { return b.(*array.StringBuilder).BinaryBuilder }), nil
		case arrow.LARGE_STRING:
			return appendBytes(func(b array.Builder) *array.BinaryBuilder { return b.(*array.LargeStringBuilder).BinaryBuilder }), nil
		}
	case iceberg.BinaryType:
		if id == arrow.BINARY || id == arrow.LARGE_BINARY { // one builder type for both
			return appendBytes(func(b array.Builder) *array.BinaryBuilder { return b.(*array.BinaryBuilder) }), nil
		}
	case iceberg.UUIDType:
		if ext, ok := out.(arrow.ExtensionType); ok && ext.ExtensionName() == extensions.NewUUIDType().ExtensionName() {
			return appendSlot[*extensions.UUIDBuilder](slotUUID), nil
		}
	case iceberg.FixedType:
		if f, ok := out.(*arrow.FixedSizeBinaryType); ok && f.ByteWidth == in.Len() {
			return appendSlot[*array.FixedSizeBinaryBuilder](func(s *slot) []byte { return s.b }), nil
		}
	case *iceberg.StructType:
		if st, ok := out.(*arrow.StructType); ok {
			return compileStruct(path, in, st)
		}
	case *iceberg.ListType:
		l, ok := out.(*arrow.ListType)
		if !ok {
			break
		}
		elem, err := compileAppend(joinPath(path, "element"), in.Element, l.Elem())
		if err != nil {
			return nil, err
		}
		return func(b array.Builder, t *Tape) {
			s := t.next()
			lb := b.(*array.ListBuilder)
			if s.null {
				lb.AppendNull()
				return
			}
			lb.Append(true)
			vb := lb.ValueBuilder()
			for n := s.i; n > 0; n-- {
				elem(vb, t)
			}
		}, nil
	case *iceberg.MapType:
		m, ok := out.(*arrow.MapType)
		if !ok {
			break
		}
		key, err := compileAppend(joinPath(path, "key"), in.KeyType, m.KeyType())
		if err != nil {
			return nil, err
		}
		value, err := compileAppend(joinPath(path, "value"), in.ValueType, m.ItemType())
		if err != nil {
			return nil, err
		}
		return func(b array.Builder, t *Tape) {
			s := t.next()
			mb := b.(*array.MapBuilder)
			if s.null {
				mb.AppendNull()
				return
			}
			mb.Append(true)
			kb, ib := mb.KeyBuilder(), mb.ItemBuilder()
			for n := s.i; n > 0; n-- {
				key(kb, t)
				value(ib, t)
			}
		}, nil
	}
	return nil, fmt.Errorf("%w: field %s: %s into Arrow %s", ErrNoFastPath, path, in, out)
}

// compileStruct compiles a struct: the codec's fields into the writer's
// fields of the same names, nulls into the writer's other fields.
func compileStruct(path string, in *iceberg.StructType, out *arrow.StructType) (tapeAppend, error) {
	type fieldAppend struct {
		idx int
		app tapeAppend
	}
	fields := make([]fieldAppend, 0, len(in.FieldList))
	used := make([]bool, out.NumFields())
	for _, f := range in.FieldList {
		idx, ok := out.FieldIdx(f.Name)
		if !ok {
			return nil, fmt.Errorf("%w: field %s: the writer's struct has no field %s", ErrNoFastPath, path, f.Name)
		}
		app, err := compileAppend(joinPath(path, f.Name), f.Type, out.Field(idx).Type)
		if err != nil {
			return nil, err
		}
		fields = append(fields, fieldAppend{idx: idx, app: app})
		used[idx] = true
	}
	var missing []int
	for i, u := range used {
		if !u {
			missing = append(missing, i)
		}
	}
	return func(b array.Builder, t *Tape) {
		s := t.next()
		sb := b.(*array.StructBuilder)
		if s.null {
			sb.AppendNull()
			return
		}
		sb.Append(true)
		for _, f := range fields {
			f.app(sb.FieldBuilder(f.idx), t)
		}
		for _, i := range missing {
			sb.FieldBuilder(i).AppendNull()
		}
	}, nil
}

// appendSlot returns how to append a slot to a builder of type B: null,
// or what value makes of it.
func appendSlot[B interface {
	array.Builder
	Append(T)
}, T any](value func(*slot) T) tapeAppend {
	return func(b array.Builder, t *Tape) {
		if s := t.next(); s.null {
			b.AppendNull()
		} else {
			b.(B).Append(value(s))
		}
	}
}

// appendBytes returns how to append a slot's bytes to a string or binary
// builder, through the BinaryBuilder that binary finds in it (each of
// those builders is one underneath).
func appendBytes(binary func(array.Builder) *array.BinaryBuilder) tapeAppend {
	return func(b array.Builder, t *Tape) {
		if s := t.next(); s.null {
			b.AppendNull()
		} else {
			binary(b).Append(s.b)
		}
	}
}

func slotInt(s *slot) int64 { return s.i }
