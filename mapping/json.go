package mapping

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

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
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseJSONValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
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
// are placeholders; the table assigns real ones.
func inferJSON(path string, v any) (iceberg.Type, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case bool:
		return iceberg.PrimitiveTypes.Bool, nil
	case string:
		return iceberg.PrimitiveTypes.String, nil
	case json.Number:
		if isInteger(v) {
			if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
				return nil, &TypeError{Path: path, Want: iceberg.PrimitiveTypes.Int64, Got: "integer " + string(v) + " (out of range)"}
			}
			return iceberg.PrimitiveTypes.Int64, nil
		}
		return iceberg.PrimitiveTypes.Float64, nil
	case []any:
		var elem iceberg.Type
		for _, e := range v {
			t, err := inferJSON(joinPath(path, "element"), e)
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
			t, err := inferJSON(joinPath(path, k), v.values[k])
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
				if g, ok := findField(h, f.Name); ok {
					f.Type = numbersAs(g.Type, f.Type)
				}
				out.FieldList[n] = f
			}
			return out
		}
	}
	return inferred
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
// value shows its type. JSON has no dates or timestamps: they stay
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
	inferred, err := inferJSON("", obj)
	if err != nil {
		return nil, false, nil, err
	}
	merged, changed, err := MergeType("", have, numbersAs(have, inferred))
	if err != nil {
		return nil, false, nil, err
	}
	st := merged.(*iceberg.StructType)
	out, err := conformJSON("", st, obj)
	if err != nil {
		return nil, false, nil, err
	}
	return st, changed, out.(map[string]any), nil
}

// conformJSON converts a parsed JSON value into the canonical
// representation of t, which holds it (MergeType said so, or the table's
// column does).
func conformJSON(path string, t iceberg.Type, v any) (any, error) {
	if v == nil {
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
			f, ok := findField(t, k)
			if !ok {
				if known, err := inferJSON(joinPath(path, k), o.values[k]); err == nil && known == nil {
					continue // nulls and empty lists: no column yet, nothing to lose
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
