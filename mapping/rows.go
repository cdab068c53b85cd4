package mapping

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RowBuilder accumulates Kafka records as rows of one Arrow record batch.
// It is not safe for concurrent use; the sink keeps one per partition so that
// each batch, and so each data file, holds rows of one partition only.
type RowBuilder struct {
	schema *arrow.Schema
	b      *array.RecordBuilder

	// The metadata columns, a raw key and the raw value are built in Go
	// slices (goColumn), the column at each index in
	// goColumns: Arrow's builders check for room and clear memory value by
	// value, and these are most of a raw table's rows. Their fields'
	// builders in b stay empty.
	topic     *bytesColumn
	partition *fixedColumn[int32]
	offset    *fixedColumn[int64]
	ts        *fixedColumn[int64]
	goColumns []goColumn

	headers *headersColumn
	// keyBytes builds a binary or string kafka_key column, key the column
	// of a decoded key's struct; both are nil when the table has no key
	// column yet.
	keyBytes *bytesColumn
	key      array.Builder
	// value holds the raw value bytes, nil when the layout does not keep
	// them.
	value *bytesColumn
	// columns are the typed value columns, by name.
	columns []valueColumn

	rows int
}

// goColumn is a column built in Go slices: newArray returns the values
// appended so far as an array of typ and starts again, with room for as
// many when reserve is set.
type goColumn interface {
	newArray(typ arrow.DataType, reserve bool) arrow.Array
}

// valueColumn is one typed value column's builder.
type valueColumn struct {
	name string
	b    array.Builder
}

// NewRowBuilder returns a builder of rows of the raw layout for the given
// Arrow schema (RawLayout.ArrowSchema of the table's schema): floe's
// metadata columns by name, the key column, and the value column.
func NewRowBuilder(mem memory.Allocator, schema *arrow.Schema) (*RowBuilder, error) {
	return RawLayout.NewRowBuilder(mem, schema)
}

// NewRowBuilder returns a builder of rows of layout l for the given Arrow
// schema (the layout's ArrowSchema, or WriterArrowSchema of its
// WriterSchema): the raw value column, when kept, is the layout's
// RawValueColumn, and a typed value column may be named value.
func (l Layout) NewRowBuilder(mem memory.Allocator, schema *arrow.Schema) (*RowBuilder, error) {
	raw := l.RawValueColumn()
	b := array.NewRecordBuilder(mem, schema)
	rb := &RowBuilder{schema: schema, b: b, goColumns: make([]goColumn, len(schema.Fields()))}
	ok := true
	for i, f := range schema.Fields() {
		fb := b.Field(i)
		var good bool
		switch f.Name {
		case ColTopic:
			_, good = fb.(*array.StringBuilder)
			rb.topic = newBytesColumn()
			rb.goColumns[i] = rb.topic
		case ColPartition:
			_, good = fb.(*array.Int32Builder)
			rb.partition = &fixedColumn[int32]{}
			rb.goColumns[i] = rb.partition
		case ColOffset:
			_, good = fb.(*array.Int64Builder)
			rb.offset = &fixedColumn[int64]{}
			rb.goColumns[i] = rb.offset
		case ColTimestamp:
			_, good = fb.(*array.TimestampBuilder)
			rb.ts = &fixedColumn[int64]{}
			rb.goColumns[i] = rb.ts
		case ColHeaders:
			// A list of structs of a string key and a binary value.
			if lb, isList := fb.(*array.ListBuilder); isList {
				if sb, isStruct := lb.ValueBuilder().(*array.StructBuilder); isStruct && sb.NumField() == 2 {
					_, isKey := sb.FieldBuilder(0).(*array.StringBuilder)
					_, isValue := sb.FieldBuilder(1).(*array.BinaryBuilder)
					good = isKey && isValue
				}
			}
			rb.headers = newHeadersColumn()
			rb.goColumns[i] = rb.headers
		case ColKey:
			switch fb.(type) {
			case *array.BinaryBuilder, *array.StringBuilder:
				rb.keyBytes = newBytesColumn()
				rb.goColumns[i] = rb.keyBytes
			default:
				rb.key = fb
			}
			good = true
		case raw:
			good = f.Type.ID() == arrow.BINARY
			rb.value = newBytesColumn()
			rb.goColumns[i] = rb.value
		default:
			rb.columns, good = append(rb.columns, valueColumn{name: f.Name, b: fb}), true
		}
		ok = ok && good
	}
	if !ok || rb.topic == nil || rb.partition == nil || rb.offset == nil || rb.ts == nil || rb.headers == nil {
		b.Release()
		return nil, fmt.Errorf("row builder: schema %s does not have floe's column types", schema)
	}
	return rb, nil
}

// Schema is the Arrow schema of the batches the builder makes.
func (rb *RowBuilder) Schema() *arrow.Schema { return rb.schema }

// appendMetadata appends the metadata columns of r.
func (rb *RowBuilder) appendMetadata(r *kgo.Record) {
	add(rb.topic, r.Topic)
	rb.partition.vals = append(rb.partition.vals, r.Partition)
	rb.offset.vals = append(rb.offset.vals, r.Offset)
	rb.ts.vals = append(rb.ts.vals, r.Timestamp.UnixMicro())
	rb.headers.append(r.Headers)
	if rb.value != nil {
		rb.value.append(r.Value)
	}
}

// Append adds one record as a row of a raw layout: the key bytes as they
// are (as text when the key column is a string, which the caller checked
// to be UTF-8), the value bytes. Null keys and null values (tombstones)
// stay null; an empty key or value stays empty.
func (rb *RowBuilder) Append(r *kgo.Record) {
	rb.appendMetadata(r)
	switch {
	case rb.keyBytes != nil:
		rb.keyBytes.append(r.Key)
	case rb.key != nil:
		rb.key.AppendNull()
	}
	for _, c := range rb.columns {
		c.b.AppendNull()
	}
	rb.rows++
}

// AppendDecoded adds one record as a row of a typed layout: the metadata
// columns from r, key (the decoded key in the canonical representation:
// []byte for a raw key, string, or a struct's map) into kafka_key, and
// the fields of value (a decoded struct; nil for a tombstone, whose value
// columns are all null) into the value columns. The caller checked key
// and value against the columns' types (CheckValue): AppendDecoded fails
// only for a builder floe never makes.
func (rb *RowBuilder) AppendDecoded(r *kgo.Record, key any, value map[string]any) error {
	rb.appendMetadata(r)
	if err := rb.appendKey(key); err != nil {
		return err
	}
	for _, c := range rb.columns {
		if err := AppendValue(c.b, value[c.name]); err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
	}
	rb.rows++
	return nil
}

// appendKey appends key, a decoded key in the canonical representation,
// to the kafka_key column, if the table has one.
func (rb *RowBuilder) appendKey(key any) error {
	switch {
	case rb.keyBytes != nil:
		switch k := key.(type) {
		case nil:
			rb.keyBytes.appendNull()
		case []byte:
			add(rb.keyBytes, k)
		case string:
			add(rb.keyBytes, k)
		default:
			return fmt.Errorf("column %s: a key of type %T in a binary or string column", ColKey, key)
		}
	case rb.key != nil:
		if err := AppendValue(rb.key, key); err != nil {
			return fmt.Errorf("column %s: %w", ColKey, err)
		}
	}
	return nil
}

// RecordSize is the number of payload bytes a record contributes to a flush:
// key, value and headers, plus a fixed cost for the metadata columns.
func RecordSize(r *kgo.Record) int64 {
	n := int64(len(r.Key)+len(r.Value)+len(r.Topic)) + 20
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// Rows is the number of rows appended since the last NewBatch.
func (rb *RowBuilder) Rows() int { return rb.rows }

// NewBatch returns the rows appended so far as one record batch and resets
// the builder. The caller owns the batch and must release it.
//
// The builder then reserves room for a batch like this one, in every
// column and nested field: batches tend to be alike, and growing buffers
// row by row from empty costs a copy at every doubling.
func (rb *RowBuilder) NewBatch() arrow.RecordBatch { return rb.newBatch(true) }

// TakeBatch returns the rows appended so far as NewBatch does, but leaves
// the builder without room reserved: for a builder that may get few rows
// or none for a while (one partition among a thousand, at a flush), whose
// reservation would be memory held for nothing.
func (rb *RowBuilder) TakeBatch() arrow.RecordBatch { return rb.newBatch(false) }

func (rb *RowBuilder) newBatch(reserve bool) arrow.RecordBatch {
	fields := rb.b.Fields()
	var sizes []builderSize
	if reserve {
		sizes = make([]builderSize, len(fields))
		for i, f := range fields {
			sizes[i] = sizeOf(f)
		}
	}
	cols := make([]arrow.Array, len(fields))
	for i, f := range fields {
		if c := rb.goColumns[i]; c != nil {
			cols[i] = c.newArray(rb.schema.Field(i).Type, reserve)
		} else {
			cols[i] = f.NewArray()
		}
	}
	batch := array.NewRecordBatch(rb.schema, cols, int64(rb.rows))
	for _, c := range cols {
		c.Release()
	}
	rb.rows = 0
	if reserve {
		for i, f := range fields {
			sizes[i].reserve(f)
		}
	}
	return batch
}

// bytesColumn builds a binary or string column in Go slices. Arrow's
// BinaryBuilder clears every buffer it reserves, which Go has cleared
// already, and checks for room value by value; the raw value is most of a
// raw table's bytes.
type bytesColumn struct {
	offsets []int32
	data    []byte
	// valid is the validity bitmap, nil while no value is null.
	valid []byte
	nulls int
}

func newBytesColumn() *bytesColumn { return &bytesColumn{offsets: []int32{0}} }

// append adds v, null when v is nil.
func (c *bytesColumn) append(v []byte) {
	if v == nil {
		c.appendNull()
		return
	}
	add(c, v)
}

// appendNull adds a null.
func (c *bytesColumn) appendNull() {
	n := len(c.offsets) - 1
	if c.valid == nil {
		c.valid = make([]byte, bitutil.BytesForBits(int64(cap(c.offsets))))
		bitutil.SetBitsTo(c.valid, 0, int64(n), true)
	}
	c.growValid(n)
	c.nulls++
	c.offsets = append(c.offsets, int32(len(c.data)))
}

// growValid makes room for the validity bit of value n, once there is a
// bitmap.
func (c *bytesColumn) growValid(n int) {
	if need := int(bitutil.BytesForBits(int64(n + 1))); need > len(c.valid) {
		c.valid = append(c.valid, make([]byte, need-len(c.valid))...)
	}
}

// add appends v to c, not null.
func add[S []byte | string](c *bytesColumn, v S) {
	if c.valid != nil {
		n := len(c.offsets) - 1
		c.growValid(n)
		bitutil.SetBit(c.valid, n)
	}
	c.data = append(c.data, v...)
	if len(c.data) > math.MaxInt32 {
		// As Arrow's BinaryBuilder does: a batch this large is a caller's bug.
		panic("mapping: a batch's values exceed 2 GiB, more than a binary column's offsets hold")
	}
	c.offsets = append(c.offsets, int32(len(c.data)))
}

func (c *bytesColumn) newArray(typ arrow.DataType, reserve bool) arrow.Array {
	n := len(c.offsets) - 1
	var valid *memory.Buffer
	if c.valid != nil {
		valid = memory.NewBufferBytes(c.valid[:bitutil.BytesForBits(int64(n))])
	}
	data := array.NewData(typ, n, []*memory.Buffer{valid,
		memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(c.offsets)), memory.NewBufferBytes(c.data)}, nil, c.nulls, 0)
	defer data.Release()
	// The batch keeps these slices: the next one gets its own.
	if reserve {
		c.offsets = append(make([]int32, 0, n+1), 0)
		c.data = make([]byte, 0, len(c.data))
	} else {
		c.offsets, c.data = []int32{0}, nil
	}
	c.valid, c.nulls = nil, 0
	return array.MakeFromData(data)
}

// headersColumn builds the kafka_headers column, a list of structs of a
// key and a value, in Go slices.
type headersColumn struct {
	// offsets are the list's, into keys and values.
	offsets      []int32
	keys, values *bytesColumn
}

func newHeadersColumn() *headersColumn {
	return &headersColumn{offsets: []int32{0}, keys: newBytesColumn(), values: newBytesColumn()}
}

// append adds a record's headers, an empty list when there are none.
func (c *headersColumn) append(hs []kgo.RecordHeader) {
	for _, h := range hs {
		add(c.keys, h.Key)
		c.values.append(h.Value)
	}
	c.offsets = append(c.offsets, int32(len(c.keys.offsets)-1))
}

func (c *headersColumn) newArray(typ arrow.DataType, reserve bool) arrow.Array {
	st := typ.(*arrow.ListType).Elem().(*arrow.StructType)
	keys := c.keys.newArray(st.Field(0).Type, reserve)
	defer keys.Release()
	values := c.values.newArray(st.Field(1).Type, reserve)
	defer values.Release()
	entries := array.NewData(st, keys.Len(), []*memory.Buffer{nil}, []arrow.ArrayData{keys.Data(), values.Data()}, 0, 0)
	defer entries.Release()
	n := len(c.offsets) - 1
	data := array.NewData(typ, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(c.offsets))},
		[]arrow.ArrayData{entries}, 0, 0)
	defer data.Release()
	// The batch keeps the slice: the next one gets its own.
	if reserve {
		c.offsets = append(make([]int32, 0, n+1), 0)
	} else {
		c.offsets = []int32{0}
	}
	return array.MakeFromData(data)
}

// fixedColumn builds a column of fixed-width values, never null, in a Go
// slice, as bytesColumn does variable-length ones.
type fixedColumn[T int32 | int64] struct{ vals []T }

func (c *fixedColumn[T]) newArray(typ arrow.DataType, reserve bool) arrow.Array {
	n := len(c.vals)
	var buf []byte
	switch v := any(c.vals).(type) {
	case []int32:
		buf = arrow.Int32Traits.CastToBytes(v)
	case []int64:
		buf = arrow.Int64Traits.CastToBytes(v)
	}
	data := array.NewData(typ, n, []*memory.Buffer{nil, memory.NewBufferBytes(buf)}, nil, 0, 0)
	defer data.Release()
	// The batch keeps the slice: the next one gets its own.
	if reserve {
		c.vals = make([]T, 0, n)
	} else {
		c.vals = nil
	}
	return array.MakeFromData(data)
}

// builderSize is what a builder held: values, value bytes (binary and
// string builders), and the same of its children.
type builderSize struct {
	n, data  int
	children []builderSize
}

func sizeOf(b array.Builder) builderSize {
	s := builderSize{n: b.Len()}
	if d, ok := b.(dataBuilder); ok {
		s.data = d.DataLen()
	}
	for _, c := range children(b) {
		s.children = append(s.children, sizeOf(c))
	}
	return s
}

// reserve reserves room for s in b, a builder of the same type, and its
// children.
func (s builderSize) reserve(b array.Builder) {
	b.Reserve(s.n)
	if d, ok := b.(dataBuilder); ok {
		d.ReserveData(s.data)
	}
	for i, c := range children(b) {
		s.children[i].reserve(c)
	}
}

// children returns the builders nested in b: a struct's fields, a list's
// elements, a map's entries (a struct of key and value).
func children(b array.Builder) []array.Builder {
	switch b := b.(type) {
	case *array.StructBuilder:
		out := make([]array.Builder, b.NumField())
		for i := range out {
			out[i] = b.FieldBuilder(i)
		}
		return out
	case interface{ ValueBuilder() array.Builder }:
		return []array.Builder{b.ValueBuilder()}
	}
	return nil
}

// dataBuilder is a builder of variable-length values (binary, string).
type dataBuilder interface {
	DataLen() int
	ReserveData(n int)
}

// Release frees the builder's buffers.
func (rb *RowBuilder) Release() { rb.b.Release() }
