package mapping

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/apache/iceberg-go"
)

// DecodeError reports a record payload that cannot be decoded (malformed
// JSON, no schema registry magic byte, a schema the registry does not
// know): the record goes to the dead-letter table with it as the reason.
type DecodeError struct {
	// Format names the decoding: json, avro, protobuf, json-schema, wire.
	Format string
	Err    error
}

func (e *DecodeError) Error() string { return fmt.Sprintf("decode %s: %v", e.Format, e.Err) }

func (e *DecodeError) Unwrap() error { return e.Err }

// jsonObject is a JSON object with its keys in document order, so that
// inferred columns follow the order producers wrote them in.
type jsonObject struct {
	keys   []string
	values map[string]any
}

// parseJSON parses one JSON document into nil, bool, json.Number, string,
// []any and *jsonObject values. Duplicate keys keep the last value, as
// encoding/json does.
// quoteStart quotes data, or its first 64 bytes and how many more there
// are.
func quoteStart(data []byte) string {
	const most = 64
	if len(data) <= most {
		return strconv.Quote(string(data))
	}
	return fmt.Sprintf("%s (and %d more bytes)", strconv.Quote(string(data[:most])), len(data)-most)
}

// ErrEmptyJSON is matched (errors.Is) by the error of JSON text that is
// empty or white space only.
var ErrEmptyJSON = errors.New("not valid JSON: empty")

func parseJSON(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w (%d bytes)", ErrEmptyJSON, len(data))
	}
	if len(data) >= 5 && data[0] == 0 {
		// No JSON text starts with a NUL; the schema-registry wire format
		// does (a new user sank Confluent-framed Debezium events with
		// --key json and was told only "not UTF-8 text at byte 5").
		return nil, fmt.Errorf("not valid JSON: the first byte is 0x00, the magic byte of the schema-registry wire format (schema ID %d in bytes 1-4): its producer used a schema-registry serializer, so sink it as registry, not json (--value registry or --key registry, with --schema-registry)", binary.BigEndian.Uint32(data[1:5]))
	}
	if err := checkJSONText(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseJSONValue(dec)
	if err != nil {
		// encoding/json's own words ("invalid character 'o' in literal
		// null") do not say what was wrong with the record.
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			// A text cut short: showing it tells where (a key that a
			// producer split at its first ':', as kcat -K: does).
			return nil, fmt.Errorf("not valid JSON: %s ends before its value does", quoteStart(data))
		}
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			// Showing the text: for "not json" encoding/json speaks of
			// a literal null (from a new-user run).
			return nil, fmt.Errorf("not valid JSON: %s (at byte %d: %w)", quoteStart(data), se.Offset, err)
		}
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// checkJSONText refuses what encoding/json would take and silently
// replace by U+FFFD, storing text the producer never wrote: bytes that are
// not UTF-8 (RFC 8259 wants UTF-8) and a \u escape of a surrogate without
// its pair.
func checkJSONText(data []byte) error {
	if !utf8.Valid(data) {
		i := 0
		for i < len(data) {
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("not valid JSON: not UTF-8 text at byte %d (0x%02x)", i, data[i])
	}
	if !bytes.Contains(data, []byte(`\u`)) {
		return nil
	}
	surrogate := func(at int) (rune, bool) {
		if at+6 > len(data) || data[at] != '\\' || data[at+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(data[at+2:at+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		if data[i+1] != 'u' {
			i++ // an escaped character: \\ is not the start of an escape
			continue
		}
		if r, ok := surrogate(i); ok && utf16.IsSurrogate(r) {
			// A high half (below U+DC00) must be followed by a low one.
			if low, ok := surrogate(i + 6); r >= 0xdc00 || !ok || low < 0xdc00 || low > 0xdfff {
				return fmt.Errorf("not valid JSON: \\u%04x at byte %d is half of a surrogate pair, without its other half", r, i)
			}
			i += 6
		}
		i += 5
	}
	return nil
}

func parseJSONValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			o := &jsonObject{values: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := parseJSONValue(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := o.values[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.values[k] = v
			}
			_, err := dec.Token() // '}'
			return o, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := parseJSONValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token() // ']'
			return l, err
		}
		return nil, fmt.Errorf("unexpected %v", tok)
	default:
		return tok, nil
	}
}

// isInteger reports whether a JSON number is written as an integer.
func isInteger(n json.Number) bool { return !strings.ContainsAny(string(n), ".eE") }

// inferJSON returns the Iceberg type of a parsed JSON value, nil when the
// value tells nothing (null, an empty list, a struct of such fields).
// Integers are long, other numbers double, objects structs (fields in
// document order), arrays lists of their elements' merged type. Field IDs
// are placeholders; the table assigns real ones. have is the table's type
// at path (nil: none yet): an integer past a long's range fits a double
// only.
func inferJSON(path string, v any, have iceberg.Type) (iceberg.Type, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case bool:
		return iceberg.PrimitiveTypes.Bool, nil
	case string:
		return iceberg.PrimitiveTypes.String, nil
	case json.Number:
		if !isInteger(v) {
			return iceberg.PrimitiveTypes.Float64, nil
		}
		if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
			// Past a long's range: a double column holds it as it holds
			// any JSON number; a new column made double by it would round
			// an id of many digits unsaid.
			if _, double := have.(iceberg.Float64Type); double {
				return iceberg.PrimitiveTypes.Float64, nil
			}
			return nil, &TypeError{Path: path, Want: iceberg.PrimitiveTypes.Int64, Got: "integer " + string(v) + " (out of range)"}
		}
		return iceberg.PrimitiveTypes.Int64, nil
	case []any:
		var elem iceberg.Type
		elemHave := elementOf(have)
		if elemHave == nil && slices.ContainsFunc(v, func(e any) bool { n, ok := e.(json.Number); return ok && !isInteger(n) }) {
			// A fraction among the numbers makes them doubles (widenInferred).
			elemHave = iceberg.PrimitiveTypes.Float64
		}
		for _, e := range v {
			t, err := inferJSON(joinPath(path, "element"), e, elemHave)
			if err != nil || t == nil {
				if err != nil {
					return nil, err
				}
				continue
			}
			if elem == nil {
				elem = t
				continue
			}
			if elem, err = widenInferred(joinPath(path, "element"), elem, t); err != nil {
				return nil, err
			}
		}
		if elem == nil {
			return nil, nil
		}
		return &iceberg.ListType{Element: elem}, nil
	case *jsonObject:
		st := &iceberg.StructType{}
		for _, k := range v.keys {
			if k == "" {
				return nil, &DecodeError{Format: "json", Err: fmt.Errorf("object %q has a field with an empty name, which cannot be a column", path)}
			}
			t, err := inferJSON(joinPath(path, k), v.values[k], fieldOf(have, k))
			if err != nil {
				return nil, err
			}
			if t != nil {
				st.FieldList = append(st.FieldList, iceberg.NestedField{Name: k, Type: t})
			}
		}
		if path != "" && len(st.FieldList) == 0 {
			return nil, nil // a nested object of nulls: Parquet has no empty groups
		}
		return st, nil
	}
	return nil, fmt.Errorf("unexpected JSON value %T", v)
}

// elementOf is the element type of a list type t, nil for any other.
func elementOf(t iceberg.Type) iceberg.Type {
	if l, ok := t.(*iceberg.ListType); ok {
		return l.Element
	}
	return nil
}

// fieldOf is the type of field name of a struct type t, nil when t is no
// struct or has no such field.
func fieldOf(t iceberg.Type, name string) iceberg.Type {
	if st, ok := t.(*iceberg.StructType); ok {
		if f, ok := FindField(st, name); ok {
			return f.Type
		}
	}
	return nil
}

// widenInferred merges two types inferred from JSON values of one field
// that no table column holds yet: besides what MergeType allows, integers
// and other numbers meet in double, since nothing was written yet.
func widenInferred(path string, a, b iceberg.Type) (iceberg.Type, error) {
	_, aLong := a.(iceberg.Int64Type)
	_, bLong := b.(iceberg.Int64Type)
	_, aDouble := a.(iceberg.Float64Type)
	_, bDouble := b.(iceberg.Float64Type)
	if (aLong && bDouble) || (aDouble && bLong) {
		return iceberg.PrimitiveTypes.Float64, nil
	}
	// At any depth: [{"p":10},{"p":9.99}] is list<struct<p double>>.
	switch at := a.(type) {
	case *iceberg.ListType:
		if bt, ok := b.(*iceberg.ListType); ok {
			e, err := widenInferred(joinPath(path, "element"), at.Element, bt.Element)
			if err != nil {
				return nil, err
			}
			out := *at
			out.Element = e
			return &out, nil
		}
	case *iceberg.StructType:
		if bt, ok := b.(*iceberg.StructType); ok {
			out := &iceberg.StructType{FieldList: slices.Clone(at.FieldList)}
			for i, f := range out.FieldList {
				if g, ok := FindField(bt, f.Name); ok {
					t, err := widenInferred(joinPath(path, f.Name), f.Type, g.Type)
					if err != nil {
						return nil, err
					}
					out.FieldList[i].Type = t
				}
			}
			for _, g := range bt.FieldList {
				if _, ok := FindField(at, g.Name); !ok {
					g.Required = false
					out.FieldList = append(out.FieldList, g)
				}
			}
			return out, nil
		}
	}
	t, _, err := MergeType(path, a, b)
	return t, err
}

// numbersAs returns the type inferred from JSON with every integer that a
// double column (or field) of have holds taken as a double: JSON does not
// tell 3 from 3.0, so an integer in a double column is no type change.
func numbersAs(have, inferred iceberg.Type) iceberg.Type {
	switch h := have.(type) {
	case iceberg.Float64Type:
		if _, ok := inferred.(iceberg.Int64Type); ok {
			return iceberg.PrimitiveTypes.Float64
		}
	case *iceberg.ListType:
		if i, ok := inferred.(*iceberg.ListType); ok {
			out := *i
			out.Element = numbersAs(h.Element, i.Element)
			return &out
		}
	case *iceberg.StructType:
		if i, ok := inferred.(*iceberg.StructType); ok {
			out := &iceberg.StructType{FieldList: make([]iceberg.NestedField, len(i.FieldList))}
			for n, f := range i.FieldList {
				if g, ok := FindField(h, f.Name); ok {
					f.Type = numbersAs(g.Type, f.Type)
				}
				out.FieldList[n] = f
			}
			return out
		}
	}
	return inferred
}

// integralAs rewrites, in place, the numbers of v that a long column or
// field of have holds and that are integers written as decimals or with an
// exponent (2.0, 1e3) into integer form: JSON does not tell 2 from 2.0, and
// JSON Schema counts both as integers.
func integralAs(have iceberg.Type, v any) {
	switch h := have.(type) {
	case *iceberg.StructType:
		o, ok := v.(*jsonObject)
		if !ok {
			return
		}
		for _, k := range o.keys {
			f, ok := FindField(h, k)
			if !ok {
				continue
			}
			if _, long := f.Type.(iceberg.Int64Type); long {
				if n, ok := o.values[k].(json.Number); ok {
					o.values[k] = integral(n)
				}
				continue
			}
			integralAs(f.Type, o.values[k])
		}
	case *iceberg.ListType:
		l, ok := v.([]any)
		if !ok {
			return
		}
		_, long := h.Element.(iceberg.Int64Type)
		for i, e := range l {
			if n, ok := e.(json.Number); ok && long {
				l[i] = integral(n)
			} else {
				integralAs(h.Element, e)
			}
		}
	}
}

// integral returns n in integer form when it is an integer within a long,
// else n. The precision follows n's digits (each under 4 bits), so that a
// fraction past a float's precision (1.00000000000000000001) is not taken
// for an integer and rounded.
func integral(n json.Number) json.Number {
	if isInteger(n) {
		return n
	}
	f, _, err := big.ParseFloat(string(n), 10, uint(len(n))*4+64, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return n
	}
	i, acc := f.Int64()
	if acc != big.Exact {
		return n
	}
	return json.Number(strconv.FormatInt(i, 10))
}

// DecodeJSON decodes a schemaless JSON object, the value or key of a
// record, against the columns the table holds (have: the struct of the
// value columns; an empty struct for a new table). It returns the struct
// type the table needs to hold the object (have evolved by MergeType: new
// fields become optional columns), whether that differs from have, and
// the object in the canonical representation of that type. A payload that
// is not a JSON object is a *DecodeError; a field whose type the table
// cannot take is a *SchemaConflictError.
//
// Inference: integers are long, other numbers double, objects structs,
// arrays lists. A field seen only as null or [] gets no column until a
// value shows its type. A value that carries no type (null, [], {}, or
// arrays and objects of only those) is null in the row wherever it is,
// columns for it or not: the same record gives the same row whenever it
// is sunk. The object returned is nil when the whole object carries
// nothing. JSON has no dates or timestamps: they stay
// strings. An integer value is accepted by a double column (it is the
// same JSON number); a fraction in a long column is a conflict, since
// Iceberg cannot widen long to double.
func DecodeJSON(data []byte, have *iceberg.StructType) (*iceberg.StructType, bool, map[string]any, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, false, nil, &DecodeError{Format: "json", Err: err}
	}
	obj, ok := v.(*jsonObject)
	if !ok {
		return nil, false, nil, &DecodeError{Format: "json", Err: fmt.Errorf("the value is %s, not a JSON object", jsonKind(v))}
	}
	return decodeJSONObject(obj, have)
}

// decodeJSONObject is DecodeJSON of a parsed object: the columns the
// table needs to hold obj, whether they differ from have, and obj in their
// canonical representation.
func decodeJSONObject(obj *jsonObject, have *iceberg.StructType) (*iceberg.StructType, bool, map[string]any, error) {
	integralAs(have, obj)
	inferred, err := inferJSON("", obj, have)
	if err != nil {
		return nil, false, nil, err
	}
	merged, changed, err := MergeType("", have, numbersAs(have, inferred))
	if err != nil {
		if c, ok := errors.AsType[*SchemaConflictError](err); ok && c.Have.Equals(iceberg.PrimitiveTypes.Int64) && c.Got.Equals(iceberg.PrimitiveTypes.Float64) {
			c.Cause = "an integer arrived first and made the column long (a JSON number column takes its type from its first value, and Iceberg cannot widen long to double); this table cannot take fractions in it: sink into a new table whose first value of the field has one (1.0), or decode with a schema (--value registry)"
		}
		return nil, false, nil, err
	}
	st := merged.(*iceberg.StructType)
	if changed {
		if err := checkInferred(have, st); err != nil {
			return nil, false, nil, err
		}
	}
	out, err := conformJSON("", st, obj)
	if err != nil || out == nil {
		return st, changed, nil, err
	}
	return st, changed, out.(map[string]any), nil
}

// maxJSONDepth bounds how deep the columns schemaless JSON adds to a table
// may nest. Each level is a nested column: a record nesting lists a
// thousand deep made a column that every later flush of the table paid
// minutes to write (found by review). A table that already has deeper
// columns (written before the bound) keeps taking records that fit them.
const maxJSONDepth = 64

// checkInferred refuses the columns st, inferred from schemaless JSON over
// the table's have, when they add a column nesting past maxJSONDepth or
// grow the schema past maxSchemaBytes (CheckSchemaSize): the record is a
// dead letter (*DecodeError, *SchemaError).
func checkInferred(have, st *iceberg.StructType) error {
	if d := typeDepth(st); d > maxJSONDepth && d > typeDepth(have) {
		return &DecodeError{Format: "json", Err: fmt.Errorf("the record would add a column nesting %d deep (objects and arrays), past %d, each level a nested column: decode such records with a schema (--value registry), or sink the topic raw (without --value)", d, maxJSONDepth)}
	}
	return CheckSchemaSize("json", st)
}

// typeDepth is how deep structs, lists and maps nest in t: 0 for a
// primitive.
func typeDepth(t iceberg.Type) int {
	d := 0
	switch t := t.(type) {
	case *iceberg.StructType:
		if t == nil {
			return 0
		}
		for _, f := range t.FieldList {
			d = max(d, typeDepth(f.Type))
		}
	case *iceberg.ListType:
		d = typeDepth(t.Element)
	case *iceberg.MapType:
		d = max(typeDepth(t.KeyType), typeDepth(t.ValueType))
	default:
		return 0
	}
	return d + 1
}

// conformJSON converts a parsed JSON value into the canonical
// representation of t, which holds it (MergeType said so, or the table's
// column does). A value that carries no type (carriesNothing) is null,
// whatever t: it reads as it does where no column for it exists yet.
func conformJSON(path string, t iceberg.Type, v any) (any, error) {
	if carriesNothing(v) {
		return nil, nil
	}
	bad := func() (any, error) { return nil, &TypeError{Path: path, Want: t, Got: "JSON " + jsonKind(v)} }
	switch t := t.(type) {
	case *iceberg.StructType:
		o, ok := v.(*jsonObject)
		if !ok {
			return bad()
		}
		m := make(map[string]any, len(o.keys))
		for _, k := range o.keys {
			f, ok := FindField(t, k)
			if !ok {
				if carriesNothing(o.values[k]) {
					continue // no column yet, nothing to lose
				}
				return nil, &TypeError{Path: path + "." + k, Want: t, Got: "a field the struct does not have"}
			}
			c, err := conformJSON(joinPath(path, k), f.Type, o.values[k])
			if err != nil {
				return nil, err
			}
			m[k] = c
		}
		return m, nil
	case *iceberg.ListType:
		l, ok := v.([]any)
		if !ok {
			return bad()
		}
		out := make([]any, len(l))
		for i, e := range l {
			c, err := conformJSON(joinPath(path, "element"), t.Element, e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case iceberg.BooleanType:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case iceberg.StringType:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case iceberg.Int64Type, iceberg.Int32Type:
		n, ok := v.(json.Number)
		if !ok || !isInteger(n) {
			return bad()
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return bad()
		}
		if _, narrow := t.(iceberg.Int32Type); narrow {
			if int64(int32(i)) != i {
				return bad()
			}
			return int32(i), nil
		}
		return i, nil
	case iceberg.Float64Type, iceberg.Float32Type:
		n, ok := v.(json.Number)
		if !ok {
			return bad()
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return bad()
		}
		if _, narrow := t.(iceberg.Float32Type); narrow {
			return float32(f), nil
		}
		return f, nil
	}
	return bad()
}

// carriesNothing reports whether a parsed JSON value tells no type: null,
// an empty array or object, or arrays and objects of such values only
// (inferJSON gives a field holding one no column). Such a value reads as
// null wherever it is sunk, so that a record gives the same row before and
// after a later record created the column.
func carriesNothing(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []any:
		for _, e := range v {
			if !carriesNothing(e) {
				return false
			}
		}
		return true
	case *jsonObject:
		for _, k := range v.keys {
			if !carriesNothing(v.values[k]) {
				return false
			}
		}
		return true
	}
	return false
}

// jsonKind names a parsed JSON value's kind for messages.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "number " + string(v)
	case []any:
		return "an array"
	case *jsonObject:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
