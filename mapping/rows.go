package mapping

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RowBuilder accumulates Kafka records as rows of one Arrow record batch.
// It is not safe for concurrent use; the sink keeps one per partition so that
// each batch, and so each data file, holds rows of one partition only.
type RowBuilder struct {
	schema *arrow.Schema
	b      *array.RecordBuilder

	topic     *array.StringBuilder
	partition *array.Int32Builder
	offset    *array.Int64Builder
	ts        *array.TimestampBuilder
	headers   *array.ListBuilder
	hdr       *array.StructBuilder
	hdrKey    *array.StringBuilder
	hdrValue  *array.BinaryBuilder
	// key is the kafka_key column's builder: binary, string, or a struct of
	// a decoded key; nil when the table has no key column yet.
	key array.Builder
	// value holds the raw value bytes, nil when the layout does not keep
	// them.
	value *array.BinaryBuilder
	// columns are the typed value columns, by name.
	columns []valueColumn

	rows int
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
	rb := &RowBuilder{schema: schema, b: b}
	ok := true
	for i, f := range schema.Fields() {
		fb := b.Field(i)
		var good bool
		switch f.Name {
		case ColTopic:
			rb.topic, good = fb.(*array.StringBuilder)
		case ColPartition:
			rb.partition, good = fb.(*array.Int32Builder)
		case ColOffset:
			rb.offset, good = fb.(*array.Int64Builder)
		case ColTimestamp:
			rb.ts, good = fb.(*array.TimestampBuilder)
		case ColHeaders:
			if rb.headers, good = fb.(*array.ListBuilder); good {
				if rb.hdr, good = rb.headers.ValueBuilder().(*array.StructBuilder); good {
					if rb.hdrKey, good = rb.hdr.FieldBuilder(0).(*array.StringBuilder); good {
						rb.hdrValue, good = rb.hdr.FieldBuilder(1).(*array.BinaryBuilder)
					}
				}
			}
		case ColKey:
			rb.key, good = fb, true
		case raw:
			rb.value, good = fb.(*array.BinaryBuilder)
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
	rb.topic.Append(r.Topic)
	rb.partition.Append(r.Partition)
	rb.offset.Append(r.Offset)
	rb.ts.Append(arrow.Timestamp(r.Timestamp.UnixMicro()))
	rb.headers.Append(true)
	for _, h := range r.Headers {
		rb.hdr.Append(true)
		rb.hdrKey.Append(h.Key)
		if h.Value == nil {
			rb.hdrValue.AppendNull()
		} else {
			rb.hdrValue.Append(h.Value)
		}
	}
	if rb.value != nil {
		if r.Value == nil {
			rb.value.AppendNull()
		} else {
			rb.value.Append(r.Value)
		}
	}
}

// Append adds one record as a row of a raw layout: the key bytes as they
// are (as text when the key column is a string, which the caller checked
// to be UTF-8), the value bytes. Null keys and null values (tombstones)
// stay null; an empty key or value stays empty.
func (rb *RowBuilder) Append(r *kgo.Record) {
	rb.appendMetadata(r)
	switch kb := rb.key.(type) {
	case *array.BinaryBuilder:
		if r.Key == nil {
			kb.AppendNull()
		} else {
			kb.Append(r.Key)
		}
	case *array.StringBuilder:
		if r.Key == nil {
			kb.AppendNull()
		} else {
			kb.Append(string(r.Key))
		}
	case nil:
	default:
		kb.AppendNull()
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
	if rb.key != nil {
		if err := AppendValue(rb.key, key); err != nil {
			return fmt.Errorf("column %s: %w", ColKey, err)
		}
	}
	for _, c := range rb.columns {
		if err := AppendValue(c.b, value[c.name]); err != nil {
			return fmt.Errorf("column %s: %w", c.name, err)
		}
	}
	rb.rows++
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
// The builder then reserves room for a batch like this one: flushes tend to
// be alike, and growing buffers row by row costs copies.
func (rb *RowBuilder) NewBatch() arrow.RecordBatch {
	rows := rb.rows
	keyBytes, valueBytes := dataLen(rb.key), 0
	if rb.value != nil {
		valueBytes = rb.value.DataLen()
	}
	topicBytes, hdrRows := rb.topic.DataLen(), rb.hdr.Len()
	hdrKeyBytes, hdrValueBytes := rb.hdrKey.DataLen(), rb.hdrValue.DataLen()
	rb.rows = 0
	batch := rb.b.NewRecordBatch()
	rb.b.Reserve(rows)
	reserveData(rb.key, keyBytes)
	if rb.value != nil {
		rb.value.ReserveData(valueBytes)
	}
	rb.topic.ReserveData(topicBytes)
	rb.hdr.Reserve(hdrRows)
	rb.hdrKey.Reserve(hdrRows)
	rb.hdrKey.ReserveData(hdrKeyBytes)
	rb.hdrValue.Reserve(hdrRows)
	rb.hdrValue.ReserveData(hdrValueBytes)
	return batch
}

// dataBuilder is a builder of variable-length values (binary, string).
type dataBuilder interface {
	DataLen() int
	ReserveData(n int)
}

// dataLen returns the value bytes the key builder holds: 0 for a struct
// key, or no key column.
func dataLen(b array.Builder) int {
	if d, ok := b.(dataBuilder); ok {
		return d.DataLen()
	}
	return 0
}

// reserveData reserves value bytes in a variable-length key builder.
func reserveData(b array.Builder, n int) {
	if d, ok := b.(dataBuilder); ok {
		d.ReserveData(n)
	}
}

// Release frees the builder's buffers.
func (rb *RowBuilder) Release() { rb.b.Release() }
