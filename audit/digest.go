package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
)

// digest fingerprints a record's content: the first 16 bytes of the SHA-256
// of its canonical encoding, which is, in order:
//
//   - the timestamp in microseconds since the Unix epoch, 8 bytes big-endian;
//   - the key, then the value, each as 0x00 when null, or 0x01, the length
//     as an unsigned varint, and the bytes;
//   - the number of headers as an unsigned varint, then each header's key
//     (length as an unsigned varint, then the bytes) and value (as above).
//
// The same record read from Kafka and its row read from the table have the
// same digest; a change to any of these fields changes it.
type digest [16]byte

// digester computes digests, reusing one buffer. It is not safe for
// concurrent use.
type digester struct{ buf []byte }

func (d *digester) begin(tsMicros int64) {
	d.buf = binary.BigEndian.AppendUint64(d.buf[:0], uint64(tsMicros))
}

func (d *digester) bytes(b []byte, null bool) {
	if null {
		d.buf = append(d.buf, 0)
		return
	}
	d.buf = append(d.buf, 1)
	d.buf = binary.AppendUvarint(d.buf, uint64(len(b)))
	d.buf = append(d.buf, b...)
}

func (d *digester) headerCount(n int) { d.buf = binary.AppendUvarint(d.buf, uint64(n)) }

func (d *digester) header(key string, value []byte, null bool) {
	d.buf = binary.AppendUvarint(d.buf, uint64(len(key)))
	d.buf = append(d.buf, key...)
	d.bytes(value, null)
}

func (d *digester) sum() digest {
	s := sha256.Sum256(d.buf)
	return digest(s[:16])
}

// record returns the digest of a record read from Kafka.
func (d *digester) record(r *kgo.Record) digest {
	d.begin(r.Timestamp.UnixMicro())
	d.bytes(r.Key, r.Key == nil)
	d.bytes(r.Value, r.Value == nil)
	d.headerCount(len(r.Headers))
	for _, h := range r.Headers {
		d.header(h.Key, h.Value, h.Value == nil)
	}
	return d.sum()
}

// rowColumns are the columns of a table batch that digests read.
type rowColumns struct {
	offset   *array.Int64
	ts       *array.Timestamp
	key      *array.Binary
	keyText  *array.String // the key column of a table of string keys
	value    *array.Binary
	headers  *array.List
	hdrKey   *array.String
	hdrValue *array.Binary
}

// contentColumns returns the columns the content level reads, a new slice
// on every call (the scan it is handed to owns it). value names the column
// of the raw value: value in a raw table, kafka_value in a dead-letter
// table.
func contentColumns(value string) []string {
	return []string{mapping.ColOffset, mapping.ColTimestamp, mapping.ColKey, mapping.ColHeaders, value}
}

// newRowColumns finds the digested columns of a batch of a table whose
// raw value is in column value; a key column of strings (--key string)
// digests as its bytes.
func newRowColumns(b arrow.RecordBatch, value string) (rowColumns, error) {
	var c rowColumns
	var ok [5]bool
	c.offset, ok[0] = column[*array.Int64](b, mapping.ColOffset)
	c.ts, ok[1] = column[*array.Timestamp](b, mapping.ColTimestamp)
	if c.key, ok[2] = column[*array.Binary](b, mapping.ColKey); !ok[2] {
		c.keyText, ok[2] = column[*array.String](b, mapping.ColKey)
	}
	c.value, ok[3] = column[*array.Binary](b, value)
	c.headers, ok[4] = column[*array.List](b, mapping.ColHeaders)
	if ok != [5]bool{true, true, true, true, true} {
		return c, fmt.Errorf("unexpected column types %s", b.Schema())
	}
	st, isStruct := c.headers.ListValues().(*array.Struct)
	if !isStruct || st.NumField() != 2 {
		return c, fmt.Errorf("column %s is not a list of key/value structs", mapping.ColHeaders)
	}
	var kOK, vOK bool
	c.hdrKey, kOK = st.Field(0).(*array.String)
	c.hdrValue, vOK = st.Field(1).(*array.Binary)
	if !kOK || !vOK {
		return c, fmt.Errorf("column %s has unexpected key/value types", mapping.ColHeaders)
	}
	if unit := c.ts.DataType().(*arrow.TimestampType).Unit; unit != arrow.Microsecond {
		return c, fmt.Errorf("column %s has unit %s, want microseconds", mapping.ColTimestamp, unit)
	}
	return c, nil
}

// row returns the digest of row i of a table batch.
func (d *digester) row(c rowColumns, i int) digest {
	d.begin(int64(c.ts.Value(i)))
	if c.keyText != nil {
		d.bytes([]byte(c.keyText.Value(i)), c.keyText.IsNull(i))
	} else {
		d.bytes(c.key.Value(i), c.key.IsNull(i))
	}
	d.bytes(c.value.Value(i), c.value.IsNull(i))
	d.headers(c.headers, c.hdrKey, c.hdrValue, i)
	return d.sum()
}

// headers digests the headers of row i of a kafka_headers column, list,
// whose entries' keys and values are keys and values: their count, then
// each key and value as bytes.
func (d *digester) headers(list *array.List, keys *array.String, values *array.Binary, i int) {
	start, end := list.ValueOffsets(i)
	if list.IsNull(i) {
		start, end = 0, 0
	}
	d.headerCount(int(end - start))
	for j := int(start); j < int(end); j++ {
		d.header(keys.Value(j), values.Value(j), values.IsNull(j))
	}
}

// typedRow returns the digest of row i of a batch of a typed table (its
// layout is not raw): the timestamp, then every column but the topic,
// partition, offset and timestamp, in name order, as its name and its
// value printed by Arrow (ValueStr: JSON for structs, lists and maps).
// A record decoded as the sink decodes it, appended to a batch of the
// table's schema, has the digest of its row.
//
// In a column decoded from schemaless JSON (layout l) a value that carries
// no type (holdsNothing) counts as null: the sink makes such a JSON value
// null wherever it is, and rows sunk before it did hold an empty list or
// a struct of nulls where the column already existed.
func (d *digester) typedRow(b arrow.RecordBatch, i int, l mapping.Layout) (digest, error) {
	ts, ok := column[*array.Timestamp](b, mapping.ColTimestamp)
	if !ok {
		return digest{}, fmt.Errorf("no %s column of microseconds in %s", mapping.ColTimestamp, b.Schema())
	}
	d.begin(int64(ts.Value(i)))
	fields := b.Schema().Fields()
	order := make([]int, 0, len(fields))
	for j, f := range fields {
		switch f.Name {
		case mapping.ColTopic, mapping.ColPartition, mapping.ColOffset, mapping.ColTimestamp:
		default:
			order = append(order, j)
		}
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(fields[x].Name, fields[y].Name) })
	for _, j := range order {
		col, name := b.Column(j), fields[j].Name
		d.bytes([]byte(name), false)
		schemaless := (name == mapping.ColKey && l.Key == mapping.KeyJSON) || (l.Value == mapping.ValueJSON && !l.IsMetadataColumn(name))
		if col.IsNull(i) || (schemaless && holdsNothing(col, i)) {
			d.bytes(nil, true)
			continue
		}
		if name == mapping.ColHeaders {
			// As bytes: ValueStr's JSON made every byte of a key that is
			// not UTF-8 the same U+FFFD, so headers that differ read
			// alike (from a review).
			if list, ok := col.(*array.List); ok {
				if st, ok := list.ListValues().(*array.Struct); ok && st.NumField() == 2 {
					keys, kOK := st.Field(0).(*array.String)
					values, vOK := st.Field(1).(*array.Binary)
					if kOK && vOK {
						d.headers(list, keys, values, i)
						continue
					}
				}
			}
		}
		d.bytes([]byte(col.ValueStr(i)), false)
	}
	return d.sum(), nil
}

// holdsNothing reports whether row i of a is null, an empty list, or a
// list or struct of such values only: what JSON that carries no type
// becomes in a column (mapping.DecodeJSON).
func holdsNothing(a arrow.Array, i int) bool {
	if a.IsNull(i) {
		return true
	}
	switch a := a.(type) {
	case *array.List:
		start, end := a.ValueOffsets(i)
		for j := start; j < end; j++ {
			if !holdsNothing(a.ListValues(), int(j)) {
				return false
			}
		}
		return true
	case *array.Struct:
		for f := range a.NumField() {
			if !holdsNothing(a.Field(f), i) {
				return false
			}
		}
		return true
	}
	return false
}
