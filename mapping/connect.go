package mapping

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"

	"github.com/apache/iceberg-go"
)

// Kafka Connect schemas, as the JSON converter writes them beside each
// payload (schemas.enable=true): {"type": "struct", "fields": [{"field":
// "id", "type": "int32", "optional": false}, …], "name": …}. ConnectType
// maps them onto Iceberg types:
//
//	int8, int16, int32     int
//	int64                  long
//	float32, float64       float, double
//	boolean, string        boolean, string
//	bytes                  binary (base64 in the payload)
//	array, map, struct     list, map, struct
//
// and by the schema's name, the logical types Kafka Connect and Debezium
// write:
//
//	org.apache.kafka.connect.data.Decimal       decimal(P, S): S from parameters.scale, P from
//	                                            parameters["connect.decimal.precision"], else 38
//	org.apache.kafka.connect.data.Date          date (days)
//	org.apache.kafka.connect.data.Time          time (ms)
//	org.apache.kafka.connect.data.Timestamp     timestamptz (ms since the epoch)
//	io.debezium.time.Date                       date (days)
//	io.debezium.time.Time, MicroTime, NanoTime  time (ms, µs, ns; below µs truncated)
//	io.debezium.time.Timestamp, MicroTimestamp,
//	NanoTimestamp                               timestamp without zone (ms, µs, ns: the source's
//	                                            local date-time, as Debezium writes it)
//	io.debezium.time.ZonedTimestamp             timestamptz (an ISO 8601 string with offset)
//
// Other names (io.debezium.data.Uuid, Json, Enum, VariableScaleDecimal,
// io.debezium.time.MicroDuration, geometry types) keep their Connect type:
// string, or the struct they are. Fields are optional whatever the schema
// says, as every codec's are, so that a later schema may drop them.

// cnode is a Connect schema mapped: its Iceberg type and the conversion of
// a parsed JSON payload into that type's canonical representation.
type cnode struct {
	typ  iceberg.Type
	conv func(v any) (any, error)
}

// connectNode maps a Connect schema, path naming it in errors.
func connectNode(path string, s *jsonObject) (cnode, error) {
	str := func(k string) string { v, _ := s.values[k].(string); return v }
	bad := func(format string, args ...any) (cnode, error) {
		return cnode{}, &SchemaError{Format: "connect", Path: path, Err: fmt.Errorf(format, args...)}
	}
	typ := str("type")
	if name := str("name"); name != "" {
		if n, ok, err := connectLogical(path, name, typ, s); ok || err != nil {
			return n, err
		}
	}
	switch typ {
	case "int8", "int16", "int32":
		return cnode{typ: iceberg.PrimitiveTypes.Int32, conv: connectInt(path, 32, func(i int64) (any, error) { return int32(i), nil })}, nil
	case "int64":
		return cnode{typ: iceberg.PrimitiveTypes.Int64, conv: connectInt(path, 64, func(i int64) (any, error) { return i, nil })}, nil
	case "float32", "float64":
		t, bits := iceberg.Type(iceberg.PrimitiveTypes.Float64), 64
		if typ == "float32" {
			t, bits = iceberg.PrimitiveTypes.Float32, 32
		}
		return cnode{typ: t, conv: func(v any) (any, error) {
			if v == nil {
				return nil, nil
			}
			n, ok := v.(json.Number)
			if !ok {
				return nil, kindErr(path, "number", v)
			}
			f, err := strconv.ParseFloat(string(n), bits)
			if err != nil {
				return nil, fieldErr(path, err)
			}
			if bits == 32 {
				return float32(f), nil
			}
			return f, nil
		}}, nil
	case "boolean":
		return cnode{typ: iceberg.PrimitiveTypes.Bool, conv: func(v any) (any, error) {
			if _, ok := v.(bool); ok || v == nil {
				return v, nil
			}
			return nil, kindErr(path, "boolean", v)
		}}, nil
	case "string":
		return cnode{typ: iceberg.PrimitiveTypes.String, conv: connectString(path, func(s string) (any, error) { return s, nil })}, nil
	case "bytes":
		return cnode{typ: iceberg.PrimitiveTypes.Binary, conv: connectBytes(path, func(b []byte) (any, error) { return b, nil })}, nil
	case "array":
		items, ok := s.values["items"].(*jsonObject)
		if !ok {
			return bad("an array without items")
		}
		elem, err := connectNode(joinPath(path, "element"), items)
		if err != nil {
			return cnode{}, err
		}
		return cnode{typ: listOf(elem.typ), conv: convList(path, elem.conv)}, nil
	case "map":
		return connectMap(path, s)
	case "struct":
		return connectStruct(path, s)
	}
	return bad("type %q is not a Kafka Connect type", typ)
}

// connectStruct maps a Connect struct schema.
func connectStruct(path string, s *jsonObject) (cnode, error) {
	fields, _ := s.values["fields"].([]any)
	st := &iceberg.StructType{}
	var convs []func(any) (any, error)
	for _, f := range fields {
		fo, ok := f.(*jsonObject)
		if !ok {
			return cnode{}, &SchemaError{Format: "connect", Path: path, Err: fmt.Errorf("a field is %s, not a schema", jsonKind(f))}
		}
		name, _ := fo.values["field"].(string)
		if name == "" {
			return cnode{}, &SchemaError{Format: "connect", Path: path, Err: fmt.Errorf("a field has no name")}
		}
		n, err := connectNode(joinPath(path, name), fo)
		if err != nil {
			return cnode{}, err
		}
		st.FieldList = append(st.FieldList, optional(name, n.typ))
		convs = append(convs, n.conv)
	}
	return cnode{typ: st, conv: func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		o, ok := v.(*jsonObject)
		if !ok {
			return nil, kindErr(path, "object", v)
		}
		for _, k := range o.keys {
			if _, ok := FindField(st, k); !ok {
				return nil, fieldErr(joinPath(path, k), fmt.Errorf("the payload has a field its schema does not"))
			}
		}
		m := make(map[string]any, len(st.FieldList))
		for i, f := range st.FieldList {
			c, err := convs[i](o.values[f.Name])
			if err != nil {
				return nil, err
			}
			m[f.Name] = c
		}
		return m, nil
	}}, nil
}

// connectMap maps a Connect map schema. The JSON converter writes a map
// with string keys as an object, any other as an array of [key, value]
// pairs.
func connectMap(path string, s *jsonObject) (cnode, error) {
	ks, ok1 := s.values["keys"].(*jsonObject)
	vs, ok2 := s.values["values"].(*jsonObject)
	if !ok1 || !ok2 {
		return cnode{}, &SchemaError{Format: "connect", Path: path, Err: fmt.Errorf("a map without keys and values schemas")}
	}
	kn, err := connectNode(joinPath(path, "key"), ks)
	if err != nil {
		return cnode{}, err
	}
	vn, err := connectNode(joinPath(path, "value"), vs)
	if err != nil {
		return cnode{}, err
	}
	entry := func(k, v any) (MapEntry, error) {
		ck, err := kn.conv(k)
		if err == nil && ck == nil {
			err = fieldErr(joinPath(path, "key"), fmt.Errorf("a null map key"))
		}
		if err != nil {
			return MapEntry{}, err
		}
		cv, err := vn.conv(v)
		return MapEntry{Key: ck, Value: cv}, err
	}
	return cnode{typ: mapOf(kn.typ, vn.typ), conv: func(v any) (any, error) {
		var out []MapEntry
		switch m := v.(type) {
		case nil:
			return nil, nil
		case *jsonObject:
			keys := append([]string(nil), m.keys...)
			sort.Strings(keys)
			for _, k := range keys {
				e, err := entry(k, m.values[k])
				if err != nil {
					return nil, err
				}
				out = append(out, e)
			}
		case []any:
			for _, p := range m {
				pair, ok := p.([]any)
				if !ok || len(pair) != 2 {
					return nil, kindErr(path, "[key, value] pair", p)
				}
				e, err := entry(pair[0], pair[1])
				if err != nil {
					return nil, err
				}
				out = append(out, e)
			}
		default:
			return nil, kindErr(path, "object or array of pairs", v)
		}
		return out, nil
	}}, nil
}

// connectLogical maps a Connect schema by its name; ok is false for a name
// that keeps its Connect type.
func connectLogical(path, name, typ string, s *jsonObject) (cnode, bool, error) {
	// scaled converts an integer of bits with conv, which refuses what
	// the type cannot hold: a time of day outside [0, 24 h), a timestamp
	// past Iceberg's microseconds.
	scaled := func(t iceberg.Type, bits int, conv func(int64) (int64, error)) (cnode, bool, error) {
		return cnode{typ: t, conv: connectInt(path, bits, func(i int64) (any, error) {
			i, err := conv(i)
			if err != nil {
				return nil, err
			}
			switch t.(type) {
			case iceberg.DateType:
				return iceberg.Date(i), nil
			case iceberg.TimeType:
				return iceberg.Time(i), nil
			}
			return iceberg.Timestamp(i), nil
		})}, true, nil
	}
	same := func(i int64) (int64, error) { return i, nil }
	// Nanoseconds are truncated toward the past, as after 1970.
	nanos := func(i int64) (int64, error) { return floorDiv(i, 1000), nil }
	date, tm := iceberg.PrimitiveTypes.Date, iceberg.PrimitiveTypes.Time
	ts, tstz := iceberg.PrimitiveTypes.Timestamp, iceberg.PrimitiveTypes.TimestampTz
	switch name {
	case connectDecimalName:
		params, _ := s.values["parameters"].(*jsonObject)
		n, err := connectDecimal("connect", path, params)
		return n, err == nil, err
	case "org.apache.kafka.connect.data.Date", "io.debezium.time.Date":
		return scaled(date, 32, same)
	case "org.apache.kafka.connect.data.Time", "io.debezium.time.Time":
		return scaled(tm, 32, func(i int64) (int64, error) { return timeOfDay(i, 1000) })
	case "io.debezium.time.MicroTime":
		return scaled(tm, 64, func(i int64) (int64, error) { return timeOfDay(i, 1) })
	case "io.debezium.time.NanoTime":
		return scaled(tm, 64, func(i int64) (int64, error) { return timeOfDay(floorDiv(i, 1000), 1) })
	case "org.apache.kafka.connect.data.Timestamp":
		return scaled(tstz, 64, millisToMicros)
	case "io.debezium.time.Timestamp":
		return scaled(ts, 64, millisToMicros)
	case "io.debezium.time.MicroTimestamp":
		return scaled(ts, 64, same)
	case "io.debezium.time.NanoTimestamp":
		return scaled(ts, 64, nanos)
	case "io.debezium.time.ZonedTimestamp":
		if typ != "string" {
			return cnode{}, false, nil
		}
		return cnode{typ: tstz, conv: connectString(path, func(s string) (any, error) {
			t, err := ParseRFC3339(s)
			if err != nil {
				return nil, fmt.Errorf("ZonedTimestamp %q is not ISO 8601 with an offset: %w", s, err)
			}
			return TimestampOf(t), nil
		})}, true, nil
	}
	return cnode{}, false, nil
}

// connectDecimalName is the name of Kafka Connect's Decimal logical type.
const connectDecimalName = "org.apache.kafka.connect.data.Decimal"

// connectDecimal maps org.apache.kafka.connect.data.Decimal of the
// Connect parameters params (scale, connect.decimal.precision): bytes, the
// unscaled value as a big-endian two's-complement integer (base64 in
// JSON), or a number with decimal.format=NUMERIC. format names the schema
// in errors.
func connectDecimal(format, path string, params *jsonObject) (cnode, error) {
	param := func(k string) string {
		if params == nil {
			return ""
		}
		v, _ := params.values[k].(string)
		return v
	}
	scale, err := strconv.Atoi(param("scale"))
	if err != nil || scale < 0 || scale > 38 {
		return cnode{}, &SchemaError{Format: format, Path: path, Err: fmt.Errorf("a Decimal without a scale parameter of 0 to 38")}
	}
	prec := 38
	if p := param("connect.decimal.precision"); p != "" {
		if prec, err = strconv.Atoi(p); err != nil || prec < 1 || prec > 38 || prec < scale {
			return cnode{}, &SchemaError{Format: format, Path: path, Err: fmt.Errorf("decimal precision %q: Iceberg holds 1 to 38 digits, at least the scale", p)}
		}
	}
	fromBytes := connectBytes(path, func(b []byte) (any, error) {
		n, err := twosComplementDecimal(b, prec)
		if err != nil {
			return nil, err
		}
		return iceberg.Decimal{Val: n, Scale: scale}, nil
	})
	return cnode{typ: iceberg.DecimalTypeOf(prec, scale), conv: func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		n, ok := v.(json.Number)
		if !ok {
			return fromBytes(v)
		}
		r, ok := new(big.Rat).SetString(string(n))
		if !ok {
			return nil, kindErr(path, "decimal", v)
		}
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
		if !r.IsInt() {
			return nil, fieldErr(path, fmt.Errorf("decimal %s has more than %d digits after the point", n, scale))
		}
		d, ok := DecimalOf(r.Num(), scale)
		if !ok || digits(d.Val) > prec {
			return nil, fieldErr(path, fmt.Errorf("decimal %s has more than %d digits", n, prec))
		}
		return d, nil
	}}, nil
}

// connectInt converts a JSON integer of at most bits bits with as.
func connectInt(path string, bits int, as func(int64) (any, error)) func(any) (any, error) {
	return func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		n, ok := v.(json.Number)
		if !ok {
			return nil, kindErr(path, "integer", v)
		}
		i, err := strconv.ParseInt(string(integral(n)), 10, bits)
		if err != nil {
			return nil, fieldErr(path, fmt.Errorf("number %s is not an integer of %d bits", n, bits))
		}
		out, err := as(i)
		if err != nil {
			return nil, fieldErr(path, err)
		}
		return out, nil
	}
}

// connectString converts a JSON string with as.
func connectString(path string, as func(string) (any, error)) func(any) (any, error) {
	return func(v any) (any, error) {
		if v == nil {
			return nil, nil
		}
		s, ok := v.(string)
		if !ok {
			return nil, kindErr(path, "string", v)
		}
		out, err := as(s)
		if err != nil {
			return nil, fieldErr(path, err)
		}
		return out, nil
	}
}

// connectBytes converts Connect bytes, base64 text in JSON, with as.
func connectBytes(path string, as func([]byte) (any, error)) func(any) (any, error) {
	return connectString(path, func(s string) (any, error) {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("bytes are not base64: %w", err)
		}
		return as(b)
	})
}

// floorDiv divides rounding toward negative infinity: a time before 1970
// is truncated toward the past, as one after it (Go's / rounds toward
// zero).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
