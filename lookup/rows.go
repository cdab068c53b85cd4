package lookup

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Bytes is a nullable binary value. In JSON it is a string when valid
// UTF-8, null when null, and {"base64": "..."} otherwise: keys and values
// are text far more often than not, and a reader of an export should not
// have to decode every one of them to see that.
type Bytes struct {
	B    []byte
	Null bool
}

// MarshalJSON encodes b as a string, null or {"base64": "..."}.
func (b Bytes) MarshalJSON() ([]byte, error) {
	switch {
	case b.Null:
		return []byte("null"), nil
	case utf8.Valid(b.B):
		return MarshalJSON(string(b.B))
	default:
		return MarshalJSON(map[string]string{"base64": base64.StdEncoding.EncodeToString(b.B)})
	}
}

// MarshalJSON is json.Marshal without its HTML escaping: a value's <, >
// and & stay as they are (json.Marshal writes \u003c), for output people
// and tools read, not a page.
func MarshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Text renders b for text and CSV: as is when valid UTF-8, base64:...
// otherwise, empty when null (CSV has no null).
func (b Bytes) Text() string {
	switch {
	case b.Null:
		return ""
	case utf8.Valid(b.B):
		return string(b.B)
	default:
		return "base64:" + base64.StdEncoding.EncodeToString(b.B)
	}
}

// Header is one Kafka header of a row; keys may repeat.
type Header struct {
	Key   string `json:"key"`
	Value Bytes  `json:"value"`
}

// Row is one table row: a Kafka record as floe stores it. Its JSON form
// (one line of a JSON lines export, or an element of floe as-of --json's
// rows) has stable field names.
type Row struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Timestamp time.Time `json:"timestamp"` // UTC
	Key       Bytes     `json:"key"`
	Value     Bytes     `json:"value"`
	Headers   []Header  `json:"headers"`
}

// JSON is the row as one line of JSON. Every field of a row marshals, so
// there is no error to report.
func (r Row) JSON() []byte {
	b, _ := MarshalJSON(r)
	return b
}

// Rows calls fn with every row of a snapshot of tbl (0: the branch head)
// below cut (nil: every row); see snapshot.Table.Rows. The byte slices of
// a row are valid only until fn returns. An error from fn stops the scan.
func Rows(ctx context.Context, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut, fn func(Row) error) error {
	return tbl.Rows(ctx, snapshotID, cut, func(b arrow.RecordBatch) error {
		return EachRow(b, fn)
	})
}

// JSONRows calls fn with every row of a snapshot of tbl below cut as one
// JSON object: Row.JSON for a table of raw values; for a typed table (or an
// upsert table) an object of all its columns, binary values (a kept raw
// value, header values, a binary key) as Bytes marshals them and the others
// in Arrow's JSON forms (timestamps and decimals as text). The slice is
// valid only until fn returns.
func JSONRows(ctx context.Context, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut, fn func([]byte) error) error {
	if tbl.Layout() == mapping.RawLayout {
		return Rows(ctx, tbl, snapshotID, cut, func(r Row) error { return fn(r.JSON()) })
	}
	return tbl.Rows(ctx, snapshotID, cut, func(b arrow.RecordBatch) error {
		fields := b.Schema().Fields()
		row := make(map[string]any, len(fields))
		for i := range int(b.NumRows()) {
			for j, c := range b.Columns() {
				row[fields[j].Name] = jsonValue(c, i)
			}
			line, err := MarshalJSON(row)
			if err != nil {
				return fmt.Errorf("rows as JSON: %w", err)
			}
			if err := fn(line); err != nil {
				return err
			}
		}
		return nil
	})
}

// jsonValue is value i of a as JSON marshals it: binary as Bytes and
// decimals with their scale, inside structs, lists and maps too, the rest
// as Arrow marshals it.
func jsonValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Binary:
		return Bytes{B: a.Value(i)}
	case *array.LargeBinary:
		return Bytes{B: a.Value(i)}
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		m := make(map[string]any, a.NumField())
		for f := range a.NumField() {
			m[st.Field(f).Name] = jsonValue(a.Field(f), i)
		}
		return m
	case *array.List:
		start, end := a.ValueOffsets(i)
		vals := a.ListValues()
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			out = append(out, jsonValue(vals, int(j)))
		}
		return out
	case *array.Map:
		// As Arrow writes a map: its entries as key and value objects.
		start, end := a.ValueOffsets(i)
		keys, items := a.Keys(), a.Items()
		out := make([]any, 0, end-start)
		for j := start; j < end; j++ {
			out = append(out, map[string]any{"key": jsonValue(keys, int(j)), "value": jsonValue(items, int(j))})
		}
		return out
	case *array.Decimal128:
		return decimalText(a, i)
	}
	return a.GetOneForMarshal(i)
}

// decimalText is decimal i of a with every digit of its scale: 12.50 of a
// decimal(10,2), where Arrow's text form goes through a float and drops
// trailing zeros (12.5) or turns small values into exponents (1e-05).
func decimalText(a *array.Decimal128, i int) string {
	return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
}

// EachRow calls fn with every row of a batch of floe's columns. The byte
// slices of a row are valid only until fn returns.
func EachRow(b arrow.RecordBatch, fn func(Row) error) error {
	return eachRow(b, mapping.ColValue, fn)
}

// eachRow is EachRow reading the value from column value: a dead-letter
// table keeps it in mapping.ColRawValue.
func eachRow(b arrow.RecordBatch, value string, fn func(Row) error) error {
	col := func(name string) (arrow.Array, error) {
		idx := b.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("rows have no %s column", name)
		}
		return b.Column(idx[0]), nil
	}
	var cols [7]arrow.Array
	for i, name := range []string{mapping.ColTopic, mapping.ColPartition, mapping.ColOffset, mapping.ColTimestamp, mapping.ColKey, value, mapping.ColHeaders} {
		c, err := col(name)
		if err != nil {
			return err
		}
		cols[i] = c
	}
	topic, ok1 := cols[0].(*array.String)
	part, ok2 := cols[1].(*array.Int32)
	off, ok3 := cols[2].(*array.Int64)
	ts, ok4 := cols[3].(*array.Timestamp)
	key, ok5 := cols[4].(*array.Binary)
	val, ok6 := cols[5].(*array.Binary)
	hdrs, ok7 := cols[6].(*array.List)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7) {
		return fmt.Errorf("rows do not have floe's column types: %s", b.Schema())
	}
	hs, ok := hdrs.ListValues().(*array.Struct)
	if !ok || hs.NumField() != 2 {
		return fmt.Errorf("rows do not have floe's header type: %s", hdrs.DataType())
	}
	hk, ok1 := hs.Field(0).(*array.String)
	hv, ok2 := hs.Field(1).(*array.Binary)
	if !ok1 || !ok2 {
		return fmt.Errorf("rows do not have floe's header type: %s", hdrs.DataType())
	}
	unit := ts.DataType().(*arrow.TimestampType).Unit
	for i := range int(b.NumRows()) {
		r := Row{
			Topic: topic.Value(i), Partition: part.Value(i), Offset: off.Value(i),
			Timestamp: ts.Value(i).ToTime(unit).UTC(),
			Key:       Bytes{B: key.Value(i), Null: key.IsNull(i)},
			Value:     Bytes{B: val.Value(i), Null: val.IsNull(i)},
			Headers:   []Header{},
		}
		start, end := hdrs.ValueOffsets(i)
		for j := int(start); j < int(end); j++ {
			r.Headers = append(r.Headers, Header{Key: hk.Value(j), Value: Bytes{B: hv.Value(j), Null: hv.IsNull(j)}})
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// RowSet is a multiset of rows by their whole content (topic, partition,
// offset, timestamp, key, value, headers): two tables hold the same rows
// when their row sets are Equal.
type RowSet map[string]int

// ReadRowSet reads the rows of a snapshot of tbl (0: the branch head) below
// cut (nil: every row) into a RowSet.
func ReadRowSet(ctx context.Context, tbl *snapshot.Table, snapshotID int64, cut mapping.Cut) (RowSet, error) {
	s := RowSet{}
	err := Rows(ctx, tbl, snapshotID, cut, func(r Row) error {
		s[r.identity()]++
		return nil
	})
	return s, err
}

// Len is the number of rows.
func (s RowSet) Len() int {
	n := 0
	for _, c := range s {
		n += c
	}
	return n
}

// Equal reports whether s and o hold the same rows, as many times each.
func (s RowSet) Equal(o RowSet) bool {
	if len(s) != len(o) {
		return false
	}
	for k, c := range s {
		if o[k] != c {
			return false
		}
	}
	return true
}

// identity encodes a row's whole content unambiguously.
func (r Row) identity() string {
	var sb strings.Builder
	bytes := func(b Bytes) {
		if b.Null {
			sb.WriteString(" null")
			return
		}
		sb.WriteByte(' ')
		sb.WriteString(strconv.Quote(string(b.B)))
	}
	sb.WriteString(strconv.Quote(r.Topic))
	fmt.Fprintf(&sb, " %d %d %d", r.Partition, r.Offset, r.Timestamp.UnixNano())
	bytes(r.Key)
	bytes(r.Value)
	fmt.Fprintf(&sb, " %d", len(r.Headers))
	for _, h := range r.Headers {
		sb.WriteByte(' ')
		sb.WriteString(strconv.Quote(h.Key))
		bytes(h.Value)
	}
	return sb.String()
}
