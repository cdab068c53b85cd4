package mapping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// avroCodec decodes Avro binary payloads written with one writer schema.
//
// hamba/avro parses the schema (names, namespaces, references, logical
// types); the payload is read by avroReader below rather than by hamba's
// reflection decoder, for three reasons: values go onto a tape (the fast
// path, tape.go) without an intermediate tree or an allocation per value,
// every length in the payload is checked against the bytes left (hamba's
// reader caps strings at 1 MiB by default and otherwise allocates what a
// corrupt length asks for), and a decoding error can name the field it
// happened in. Decode reads the canonical value off the tape, so that both
// paths share one decoder and refuse the same payloads for the same
// reasons.
type avroCodec struct {
	typ iceberg.Type
	dec avroDecoder
	// tapes holds Decode's tapes between calls: Decode copies the values
	// out, and a codec may decode in several goroutines at once.
	tapes sync.Pool
}

// avroDecoder reads one value of one schema from r onto t. A type with no
// column (null) pushes nothing.
type avroDecoder func(r *avroReader, t *Tape) error

// NewAvroCodec returns the codec of an Avro schema. refs holds the schemas
// the registry lists as the schema's references, by reference name (for
// Avro, the full name of the type they define); they may refer to one
// another, in any order.
func NewAvroCodec(schema string, refs map[string]string) (Codec, error) {
	cache := &avro.SchemaCache{} // never hamba's global cache: two schema versions may define one name differently
	if err := parseAvroRefs(cache, refs); err != nil {
		return nil, err
	}
	s, err := avro.ParseWithCache(schema, "", cache)
	if err != nil {
		return nil, &SchemaError{Format: "avro", Err: err}
	}
	b := avroBuilder{inProgress: map[string]bool{}}
	t, dec, err := b.build("", s)
	if _, isStruct := t.(*iceberg.StructType); err == nil && !isStruct {
		// one column named value: build again so that errors name it
		t, dec, err = b.build(ColValue, s)
	}
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, &SchemaError{Format: "avro", Err: errors.New("the schema is null, which no Iceberg column can hold")}
	}
	if t, err = finishType("avro", t); err != nil {
		return nil, err
	}
	return &avroCodec{typ: t, dec: dec}, nil
}

// parseAvroRefs parses the referenced schemas into cache. A reference may
// use a type another one defines, and a map has no order, so the
// references are parsed in rounds until all are in or a round makes no
// progress.
func parseAvroRefs(cache *avro.SchemaCache, refs map[string]string) error {
	left := make([]string, 0, len(refs))
	for name := range refs {
		left = append(left, name)
	}
	sort.Strings(left) // a stable error message
	for len(left) > 0 {
		var failed []string
		var lastErr error
		for _, name := range left {
			if _, err := avro.ParseWithCache(refs[name], "", cache); err != nil {
				failed = append(failed, name)
				lastErr = fmt.Errorf("reference %s: %w", name, err)
			}
		}
		if len(failed) == len(left) {
			return &SchemaError{Format: "avro", Err: lastErr}
		}
		left = failed
	}
	return nil
}

func (c *avroCodec) Type() iceberg.Type { return c.typ }

func (c *avroCodec) Decode(payload []byte) (any, error) {
	t, _ := c.tapes.Get().(*Tape)
	if t == nil {
		t = &Tape{}
	}
	defer c.tapes.Put(t)
	if err := c.DecodeTape(payload, t); err != nil {
		return nil, err
	}
	return t.value(c.typ), nil
}

func (c *avroCodec) DecodeTape(payload []byte, t *Tape) error {
	t.reset()
	r := avroReader{b: payload}
	if err := c.dec(&r, t); err != nil {
		return &DecodeError{Format: "avro", Err: err}
	}
	if n := len(r.b) - r.off; n > 0 {
		return &DecodeError{Format: "avro", Err: fmt.Errorf("%d bytes left after the value: the payload was not written with this schema", n)}
	}
	return nil
}

// derefAvro returns the named schema a reference stands for.
func derefAvro(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// avroBuilder turns a parsed schema into an Iceberg type and a decoder.
type avroBuilder struct {
	// inProgress holds the full names of the records being built, to refuse
	// recursive records: Iceberg types are finite trees.
	inProgress map[string]bool
	budget     typeBudget
}

// build returns the Iceberg type of s, path naming it, and its decoder.
// The type is nil for null (and a union of null alone), which no column
// can hold: a record leaves such a field out.
func (b *avroBuilder) build(path string, s avro.Schema) (iceberg.Type, avroDecoder, error) {
	fail := func(format string, args ...any) (iceberg.Type, avroDecoder, error) {
		return nil, nil, &SchemaError{Format: "avro", Path: path, Err: fmt.Errorf(format, args...)}
	}
	if err := b.budget.spend("avro", path); err != nil {
		return nil, nil, err
	}
	wrap := func(err error) error { return fieldErr(path, err) }
	s = derefAvro(s)
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		return b.buildLogical(path, s, ls.Logical())
	}
	switch s := s.(type) {
	case *avro.NullSchema:
		return nil, func(*avroReader, *Tape) error { return nil }, nil
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Boolean:
			return iceberg.PrimitiveTypes.Bool, func(r *avroReader, t *Tape) error {
				v, err := r.bool()
				if err != nil {
					return wrap(err)
				}
				if v {
					t.pushInt(1)
				} else {
					t.pushInt(0)
				}
				return nil
			}, nil
		case avro.Int:
			return iceberg.PrimitiveTypes.Int32, func(r *avroReader, t *Tape) error {
				v, err := r.int()
				if err != nil {
					return wrap(err)
				}
				t.pushInt(int64(v))
				return nil
			}, nil
		case avro.Long:
			return iceberg.PrimitiveTypes.Int64, func(r *avroReader, t *Tape) error {
				v, err := r.long()
				if err != nil {
					return wrap(err)
				}
				t.pushInt(v)
				return nil
			}, nil
		case avro.Float:
			return iceberg.PrimitiveTypes.Float32, func(r *avroReader, t *Tape) error {
				b, err := r.fixed(4)
				if err != nil {
					return wrap(err)
				}
				t.pushInt(int64(binary.LittleEndian.Uint32(b)))
				return nil
			}, nil
		case avro.Double:
			return iceberg.PrimitiveTypes.Float64, func(r *avroReader, t *Tape) error {
				b, err := r.fixed(8)
				if err != nil {
					return wrap(err)
				}
				t.pushInt(int64(binary.LittleEndian.Uint64(b)))
				return nil
			}, nil
		case avro.String:
			return iceberg.PrimitiveTypes.String, func(r *avroReader, t *Tape) error {
				v, err := r.text()
				if err != nil {
					return wrap(err)
				}
				t.pushBytes(v)
				return nil
			}, nil
		case avro.Bytes:
			return iceberg.PrimitiveTypes.Binary, func(r *avroReader, t *Tape) error {
				v, err := r.bytes()
				if err != nil {
					return wrap(err)
				}
				t.pushBytes(v)
				return nil
			}, nil
		}
	case *avro.FixedSchema:
		n := s.Size()
		if n <= 0 {
			return fail("fixed %s has size %d; Iceberg's fixed needs at least one byte", s.FullName(), n)
		}
		return iceberg.FixedTypeOf(n), func(r *avroReader, t *Tape) error {
			v, err := r.fixed(n)
			if err != nil {
				return wrap(err)
			}
			t.pushBytes(v)
			return nil
		}, nil
	case *avro.EnumSchema:
		symbols := make([][]byte, len(s.Symbols()))
		for i, sym := range s.Symbols() {
			symbols[i] = []byte(sym)
		}
		return iceberg.PrimitiveTypes.String, func(r *avroReader, t *Tape) error {
			i, err := r.int()
			if err != nil {
				return wrap(err)
			}
			if i < 0 || int(i) >= len(symbols) {
				return wrap(fmt.Errorf("enum index %d, the enum has %d symbols", i, len(symbols)))
			}
			t.pushBytes(symbols[i]) // appenders only read it
			return nil
		}, nil
	case *avro.RecordSchema:
		return b.buildRecord(path, s)
	case *avro.ArraySchema:
		t, item, err := b.build(joinPath(path, "element"), s.Items())
		if err != nil {
			return nil, nil, err
		}
		if t == nil {
			return fail("an array of null has no Iceberg type")
		}
		return listOf(t), func(r *avroReader, tp *Tape) error {
			at := tp.pushCount()
			var n int64
			err := r.blocks(path, func() error {
				n++
				return item(r, tp)
			})
			if err != nil {
				return err
			}
			tp.setCount(at, n)
			return nil
		}, nil
	case *avro.MapSchema:
		t, value, err := b.build(joinPath(path, "value"), s.Values())
		if err != nil {
			return nil, nil, err
		}
		if t == nil {
			return fail("a map of null has no Iceberg type")
		}
		return mapOf(iceberg.PrimitiveTypes.String, t), func(r *avroReader, tp *Tape) error {
			at := tp.pushCount()
			var keys mapKeys
			err := r.blocks(path, func() error {
				k, err := r.text()
				if err != nil {
					return fieldErr(joinPath(path, "key"), err)
				}
				if !keys.add(k) {
					return fieldErr(path, fmt.Errorf("map key %q repeats", k))
				}
				tp.pushBytes(k)
				return value(r, tp)
			})
			if err != nil {
				return err
			}
			tp.setCount(at, int64(keys.n))
			return nil
		}, nil
	case *avro.UnionSchema:
		return b.buildUnion(path, s)
	}
	return fail("Avro type %s has no Iceberg type", s.Type())
}

// buildRecord maps a record to a struct of its fields, in schema order.
// Null fields hold nothing and get no column.
func (b *avroBuilder) buildRecord(path string, s *avro.RecordSchema) (iceberg.Type, avroDecoder, error) {
	if b.inProgress[s.FullName()] {
		return nil, nil, &SchemaError{Format: "avro", Path: path,
			Err: fmt.Errorf("record %s contains itself; Iceberg has no recursive types", s.FullName())}
	}
	b.inProgress[s.FullName()] = true
	defer delete(b.inProgress, s.FullName())
	st := &iceberg.StructType{}
	fields := make([]avroDecoder, 0, len(s.Fields()))
	for _, f := range s.Fields() {
		t, dec, err := b.build(joinPath(path, f.Name()), f.Type())
		if err != nil {
			return nil, nil, err
		}
		if t != nil { // a null field is read, and pushes nothing
			st.FieldList = append(st.FieldList, optional(f.Name(), t))
		}
		fields = append(fields, dec)
	}
	if len(st.FieldList) == 0 && path != "" {
		return nil, nil, &SchemaError{Format: "avro", Path: path,
			Err: fmt.Errorf("record %s has no field with a type Iceberg can hold (Parquet has no empty groups)", s.FullName())}
	}
	return st, func(r *avroReader, t *Tape) error {
		t.pushInt(0) // present
		for _, dec := range fields {
			if err := dec(r, t); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// buildUnion maps a union. Null branches make the value null; one other
// branch gives that branch's type (a union [null, T] is an optional T);
// several give a struct with one optional field per branch, named after the
// branch (avroBranchNames), of which the decoded value sets the one the
// payload chose.
func (b *avroBuilder) buildUnion(path string, s *avro.UnionSchema) (iceberg.Type, avroDecoder, error) {
	branches := s.Types()
	names, err := avroBranchNames(branches)
	if err != nil {
		return nil, nil, &SchemaError{Format: "avro", Path: path, Err: err}
	}
	nonNull := 0
	for _, br := range branches {
		if br.Type() != avro.Null {
			nonNull++
		}
	}
	decs := make([]avroDecoder, len(branches))
	var st *iceberg.StructType
	var single iceberg.Type
	if nonNull > 1 {
		st = &iceberg.StructType{}
	}
	null := func(_ *avroReader, t *Tape) error {
		t.pushNull()
		return nil
	}
	if nonNull == 0 {
		// A union of null alone has no type, and no column to push to.
		null = func(*avroReader, *Tape) error { return nil }
	}
	for i, br := range branches {
		if br.Type() == avro.Null {
			decs[i] = null
			continue
		}
		brPath := path
		if st != nil {
			brPath = joinPath(path, names[i])
		}
		t, dec, err := b.build(brPath, br)
		if err != nil {
			return nil, nil, err
		}
		if st == nil {
			single, decs[i] = t, dec
			continue
		}
		// The struct's fields are the other branches, in order: this
		// branch's value, null in the others.
		field := len(st.FieldList)
		st.FieldList = append(st.FieldList, optional(names[i], t))
		decs[i] = func(r *avroReader, t *Tape) error {
			t.pushInt(0) // present
			for range field {
				t.pushNull()
			}
			if err := dec(r, t); err != nil {
				return err
			}
			for range nonNull - field - 1 {
				t.pushNull()
			}
			return nil
		}
	}
	dec := func(r *avroReader, t *Tape) error {
		i, err := r.long()
		if err != nil {
			return fieldErr(path, fmt.Errorf("union branch: %w", err))
		}
		if i < 0 || i >= int64(len(decs)) {
			return fieldErr(path, fmt.Errorf("union branch %d, the union has %d", i, len(decs)))
		}
		return decs[i](r, t)
	}
	if st != nil {
		return st, dec, nil
	}
	return single, dec, nil
}

// avroBranchNames names the fields of the struct a union maps to: a
// primitive branch by its type (int, long, string, bytes, ...), one with a
// logical type by the logical type, dashes made underscores
// (timestamp_millis: a union may hold both long and timestamp-millis), an
// array or map by "array" or "map", and a record, enum or fixed by its
// name without namespace, or, when two branches share that name, by its
// full name with dots replaced by underscores (Avro allows records com.a.Id
// and com.b.Id in one union; Iceberg names must differ, and dots in them
// confuse SQL).
func avroBranchNames(branches avro.Schemas) ([]string, error) {
	names := make([]string, len(branches))
	count := map[string]int{}
	for i, br := range branches {
		br = derefAvro(br)
		names[i] = string(br.Type())
		if n, ok := br.(avro.NamedSchema); ok {
			names[i] = n.Name()
		} else if l, ok := br.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
			names[i] = strings.ReplaceAll(string(l.Logical().Type()), "-", "_")
		}
		count[names[i]]++
	}
	seen := map[string]bool{}
	for i, br := range branches {
		if n, ok := derefAvro(br).(avro.NamedSchema); ok && count[names[i]] > 1 {
			names[i] = strings.ReplaceAll(n.FullName(), ".", "_")
		}
		if seen[names[i]] {
			return nil, fmt.Errorf("two union branches would both be named %s", names[i])
		}
		seen[names[i]] = true
	}
	return names, nil
}

// buildLogical maps Avro's logical types.
func (b *avroBuilder) buildLogical(path string, s avro.Schema, l avro.LogicalSchema) (iceberg.Type, avroDecoder, error) {
	wrap := func(err error) error { return fieldErr(path, err) }
	// long reads a long and pushes what conv makes of it.
	long := func(conv func(int64) (int64, error)) avroDecoder {
		return func(r *avroReader, t *Tape) error {
			v, err := r.long()
			if err == nil {
				if v, err = conv(v); err == nil {
					t.pushInt(v)
					return nil
				}
			}
			return wrap(err)
		}
	}
	same := func(v int64) (int64, error) { return v, nil }
	switch l.Type() {
	case avro.Date:
		return iceberg.PrimitiveTypes.Date, long(func(v int64) (int64, error) {
			if v != int64(int32(v)) {
				return 0, fmt.Errorf("date %d out of range", v)
			}
			return v, nil
		}), nil
	case avro.TimeMillis:
		return iceberg.PrimitiveTypes.Time, long(func(v int64) (int64, error) { return timeOfDay(v, 1000) }), nil
	case avro.TimeMicros:
		return iceberg.PrimitiveTypes.Time, long(func(v int64) (int64, error) { return timeOfDay(v, 1) }), nil
	case avro.TimestampMillis:
		return iceberg.PrimitiveTypes.TimestampTz, long(millisToMicros), nil
	case avro.TimestampMicros:
		return iceberg.PrimitiveTypes.TimestampTz, long(same), nil
	case avro.LocalTimestampMillis:
		return iceberg.PrimitiveTypes.Timestamp, long(millisToMicros), nil
	case avro.LocalTimestampMicros:
		return iceberg.PrimitiveTypes.Timestamp, long(same), nil
	case avro.UUID:
		return iceberg.PrimitiveTypes.UUID, func(r *avroReader, t *Tape) error {
			v, err := r.text()
			if err != nil {
				return wrap(err)
			}
			id, err := uuid.ParseBytes(v)
			if err != nil {
				_, err = uuid.Parse(string(v)) // the error Parse gives a string, as before
				return wrap(fmt.Errorf("uuid %q: %w", v, err))
			}
			t.pushPair(int64(binary.BigEndian.Uint64(id[:8])), int64(binary.BigEndian.Uint64(id[8:])))
			return nil
		}, nil
	case avro.Decimal:
		d := l.(*avro.DecimalLogicalSchema)
		prec := d.Precision()
		if prec > 38 && connectDecimalWithoutPrecision(s) && d.Scale() <= 38 {
			// Confluent's AvroConverter writes a Kafka Connect Decimal
			// that has no precision (the JDBC source's NUMERIC) as
			// precision 64, its default: take it as the JsonConverter's
			// is, decimal(38, S), and a value of more digits as a dead
			// letter (twosComplementDecimal).
			prec = 38
		}
		if prec > 38 {
			return nil, nil, &SchemaError{Format: "avro", Path: path,
				Err: fmt.Errorf("decimal precision %d; Iceberg's decimals hold at most 38 digits", d.Precision())}
		}
		size := -1 // bytes: length-prefixed
		if f, ok := s.(*avro.FixedSchema); ok {
			size = f.Size()
		}
		return iceberg.DecimalTypeOf(prec, d.Scale()), func(r *avroReader, t *Tape) error {
			var b []byte
			var err error
			if size < 0 {
				b, err = r.bytes()
			} else {
				b, err = r.fixed(size)
			}
			if err != nil {
				return wrap(err)
			}
			v, err := twosComplementDecimal(b, prec)
			if err != nil {
				return wrap(err)
			}
			t.pushPair(int64(v.LowBits()), v.HighBits())
			return nil
		}, nil
	}
	// Iceberg has no type for the remaining one, duration (a fixed(12) of
	// months, days and milliseconds): keep its bytes, as Avro's spec says
	// a reader that does not know a logical type should. (hamba drops the
	// logical types it does not know itself.)
	f, ok := s.(*avro.FixedSchema)
	if !ok {
		return nil, nil, &SchemaError{Format: "avro", Path: path, Err: fmt.Errorf("logical type %s on %s", l.Type(), s.Type())}
	}
	plain, err := avro.NewFixedSchema(f.Name(), f.Namespace(), f.Size(), nil)
	if err != nil {
		return nil, nil, &SchemaError{Format: "avro", Path: path, Err: err}
	}
	return b.build(path, plain)
}

// connectDecimalWithoutPrecision reports whether s is a Kafka Connect
// Decimal as Confluent's AvroConverter writes it (connect.name) whose
// Connect schema had no precision (no connect.decimal.precision among its
// connect.parameters).
func connectDecimalWithoutPrecision(s avro.Schema) bool {
	ps, ok := s.(avro.PropertySchema)
	if !ok || ps.Prop("connect.name") != connectDecimalName {
		return false
	}
	params, _ := ps.Prop("connect.parameters").(map[string]any)
	_, has := params["connect.decimal.precision"]
	return !has
}

// timeOfDay converts a time of day in units of unit microseconds to
// microseconds, and refuses one outside [0, 24h): Iceberg's time is a time
// of day.
func timeOfDay(v, unit int64) (int64, error) {
	const day = 86_400_000_000
	if v < 0 || v >= day/unit {
		return 0, fmt.Errorf("time of day %d is outside [0, 24h)", v)
	}
	return v * unit, nil
}

// millisToMicros converts a timestamp in milliseconds to microseconds.
func millisToMicros(v int64) (int64, error) {
	if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
		return 0, fmt.Errorf("timestamp %d ms is out of range", v)
	}
	return v * 1000, nil
}

// twosComplementDecimal converts Avro's decimal encoding, the unscaled value
// as a big-endian two's-complement integer, and refuses one of more digits
// than prec (at most 38).
func twosComplementDecimal(b []byte, prec int) (decimal128.Num, error) {
	if len(b) <= 16 {
		// The common case, without allocating: sign-extend into 128 bits.
		var hi, lo uint64
		if len(b) > 0 && b[0]&0x80 != 0 {
			hi, lo = math.MaxUint64, math.MaxUint64
		}
		for _, c := range b {
			hi = hi<<8 | lo>>56
			lo = lo<<8 | uint64(c)
		}
		n := decimal128.New(int64(hi), lo)
		// Abs of the least 128-bit value stays negative: too many digits.
		if abs := n.Abs(); abs.Sign() >= 0 && abs.Less(decimal128.GetScaleMultiplier(prec)) {
			return n, nil
		}
	}
	n := new(big.Int)
	if len(b) > 0 {
		n.SetBytes(b)
		if b[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
	}
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(prec)), nil)
	if new(big.Int).Abs(n).Cmp(limit) >= 0 {
		return decimal128.Num{}, fmt.Errorf("decimal %s (unscaled) has more digits than the precision allows", n)
	}
	return decimal128.FromBigInt(n), nil
}

// avroReader reads Avro's binary encoding from one payload, checking every
// length against the bytes left.
type avroReader struct {
	b   []byte
	off int
}

var errAvroShort = errors.New("the payload ends inside the value")

// long reads a zig-zag varint.
func (r *avroReader) long() (int64, error) {
	var u uint64
	for i := 0; ; i++ {
		if r.off >= len(r.b) {
			return 0, errAvroShort
		}
		c := r.b[r.off]
		r.off++
		if i == 9 && c > 1 {
			return 0, errors.New("varint longer than 64 bits")
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), nil
}

func (r *avroReader) int() (int32, error) {
	v, err := r.long()
	if err != nil {
		return 0, err
	}
	if v != int64(int32(v)) {
		return 0, fmt.Errorf("int %d overflows 32 bits", v)
	}
	return int32(v), nil
}

func (r *avroReader) bool() (bool, error) {
	b, err := r.fixed(1)
	if err != nil {
		return false, err
	}
	if b[0] > 1 {
		return false, fmt.Errorf("boolean byte %d (want 0 or 1)", b[0])
	}
	return b[0] == 1, nil
}

// fixed returns the next n bytes, aliasing the payload.
func (r *avroReader) fixed(n int) ([]byte, error) {
	if n > len(r.b)-r.off {
		return nil, errAvroShort
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b, nil
}

// bytes returns a length-prefixed byte string, aliasing the payload.
func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.b)-r.off) {
		return nil, fmt.Errorf("length %d with %d bytes left", n, len(r.b)-r.off)
	}
	return r.fixed(int(n))
}

// text reads a string, aliasing the payload. It must be UTF-8: Parquet
// and query engines take string columns to be UTF-8.
func (r *avroReader) text() ([]byte, error) {
	b, err := r.bytes()
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, errors.New("string is not valid UTF-8")
	}
	return b, nil
}

// mapKeys holds the keys of one map being read, to refuse a key that
// repeats. A map of a few keys, the usual, is searched without
// allocating; a large one gets a set, so that a payload of many keys
// cannot make the search quadratic.
type mapKeys struct {
	n     int
	small [8][]byte
	set   map[string]struct{}
}

// add adds k and reports whether it is new.
func (m *mapKeys) add(k []byte) bool {
	if m.n < len(m.small) {
		for _, s := range m.small[:m.n] {
			if string(s) == string(k) {
				return false
			}
		}
		m.small[m.n] = k
		m.n++
		return true
	}
	if m.set == nil {
		m.set = make(map[string]struct{}, 2*len(m.small))
		for _, s := range m.small {
			m.set[string(s)] = struct{}{}
		}
	}
	if _, ok := m.set[string(k)]; ok {
		return false
	}
	m.set[string(k)] = struct{}{}
	m.n++
	return true
}

// blocks reads the blocks of the array or map at path, calling item once
// per item (item names the field in its own errors). A block's count is
// checked against the bytes left: every type with a column takes at least
// one byte, so a corrupt count fails at once instead of looping.
func (r *avroReader) blocks(path string, item func() error) error {
	for {
		n, err := r.long()
		if err != nil {
			return fieldErr(path, err)
		}
		if n == 0 {
			return nil
		}
		if n < 0 { // a negative count is followed by the block's size in bytes
			if n == math.MinInt64 {
				return fieldErr(path, fmt.Errorf("block count %d", n))
			}
			n = -n
			if _, err := r.long(); err != nil {
				return fieldErr(path, err)
			}
		}
		if n > int64(len(r.b)-r.off) {
			return fieldErr(path, fmt.Errorf("block of %d items with %d bytes left", n, len(r.b)-r.off))
		}
		for ; n > 0; n-- {
			if err := item(); err != nil {
				return err
			}
		}
	}
}
