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
	key       *array.BinaryBuilder
	headers   *array.ListBuilder
	hdr       *array.StructBuilder
	hdrKey    *array.StringBuilder
	hdrValue  *array.BinaryBuilder
	value     *array.BinaryBuilder

	rows int
}

// NewRowBuilder returns a builder for the given Arrow schema, which must be
// the one ArrowSchema returned (floe's columns in floe's order).
func NewRowBuilder(mem memory.Allocator, schema *arrow.Schema) (*RowBuilder, error) {
	if schema.NumFields() != len(Schema().Fields()) {
		return nil, fmt.Errorf("row builder: schema has %d fields, floe writes %d", schema.NumFields(), len(Schema().Fields()))
	}
	b := array.NewRecordBuilder(mem, schema)
	rb := &RowBuilder{schema: schema, b: b}
	var ok bool
	rb.topic, ok = b.Field(0).(*array.StringBuilder)
	if ok {
		rb.partition, ok = b.Field(1).(*array.Int32Builder)
	}
	if ok {
		rb.offset, ok = b.Field(2).(*array.Int64Builder)
	}
	if ok {
		rb.ts, ok = b.Field(3).(*array.TimestampBuilder)
	}
	if ok {
		rb.key, ok = b.Field(4).(*array.BinaryBuilder)
	}
	if ok {
		rb.headers, ok = b.Field(5).(*array.ListBuilder)
	}
	if ok {
		rb.hdr, ok = rb.headers.ValueBuilder().(*array.StructBuilder)
	}
	if ok {
		rb.hdrKey, ok = rb.hdr.FieldBuilder(0).(*array.StringBuilder)
	}
	if ok {
		rb.hdrValue, ok = rb.hdr.FieldBuilder(1).(*array.BinaryBuilder)
	}
	if ok {
		rb.value, ok = b.Field(6).(*array.BinaryBuilder)
	}
	if !ok {
		b.Release()
		return nil, fmt.Errorf("row builder: schema %s does not have floe's column types", schema)
	}
	return rb, nil
}

// Append adds one record as a row. Null keys and null values (tombstones)
// stay null; an empty key or value stays empty.
func (rb *RowBuilder) Append(r *kgo.Record) {
	rb.topic.Append(r.Topic)
	rb.partition.Append(r.Partition)
	rb.offset.Append(r.Offset)
	rb.ts.Append(arrow.Timestamp(r.Timestamp.UnixMicro()))
	if r.Key == nil {
		rb.key.AppendNull()
	} else {
		rb.key.Append(r.Key)
	}
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
	if r.Value == nil {
		rb.value.AppendNull()
	} else {
		rb.value.Append(r.Value)
	}
	rb.rows++
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
	keyBytes, valueBytes := rb.key.DataLen(), rb.value.DataLen()
	topicBytes, hdrRows := rb.topic.DataLen(), rb.hdr.Len()
	hdrKeyBytes, hdrValueBytes := rb.hdrKey.DataLen(), rb.hdrValue.DataLen()
	rb.rows = 0
	batch := rb.b.NewRecordBatch()
	rb.b.Reserve(rows)
	rb.key.ReserveData(keyBytes)
	rb.value.ReserveData(valueBytes)
	rb.topic.ReserveData(topicBytes)
	rb.hdr.Reserve(hdrRows)
	rb.hdrKey.Reserve(hdrRows)
	rb.hdrKey.ReserveData(hdrKeyBytes)
	rb.hdrValue.Reserve(hdrRows)
	rb.hdrValue.ReserveData(hdrValueBytes)
	return batch
}

// Release frees the builder's buffers.
func (rb *RowBuilder) Release() { rb.b.Release() }
