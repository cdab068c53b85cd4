package mapping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tapeRecord has a field of every Avro type in the README's mapping table,
// plain, nullable and nested, and unions with several branches.
const tapeRecord = `{"type":"record","name":"All","namespace":"test","fields":[
  {"name":"b","type":"boolean"},
  {"name":"i","type":"int"},
  {"name":"l","type":"long"},
  {"name":"f","type":"float"},
  {"name":"d","type":"double"},
  {"name":"s","type":"string"},
  {"name":"by","type":"bytes"},
  {"name":"fx","type":{"type":"fixed","name":"F5","size":5}},
  {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}},
  {"name":"date","type":{"type":"int","logicalType":"date"}},
  {"name":"tms","type":{"type":"int","logicalType":"time-millis"}},
  {"name":"tus","type":{"type":"long","logicalType":"time-micros"}},
  {"name":"tsms","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"tsus","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"ltsms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
  {"name":"ltsus","type":{"type":"long","logicalType":"local-timestamp-micros"}},
  {"name":"decb","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
  {"name":"decb38","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":10}},
  {"name":"decf","type":{"type":"fixed","name":"D8","size":8,"logicalType":"decimal","precision":18,"scale":4}},
  {"name":"decf38","type":{"type":"fixed","name":"D20","size":20,"logicalType":"decimal","precision":38,"scale":0}},
  {"name":"u","type":{"type":"string","logicalType":"uuid"}},
  {"name":"dur","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}},
  {"name":"n","type":"null"},
  {"name":"onlynull","type":["null"]},
  {"name":"os","type":["null","string"]},
  {"name":"ol","type":["long","null"]},
  {"name":"otsms","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
  {"name":"odec","type":["null",{"type":"bytes","logicalType":"decimal","precision":5,"scale":1}]},
  {"name":"rec","type":{"type":"record","name":"Inner","fields":[
    {"name":"a","type":"int"},{"name":"n","type":"null"},{"name":"s","type":["null","string"]},
    {"name":"tags","type":{"type":"array","items":"string"}}]}},
  {"name":"orec","type":["null","Inner"]},
  {"name":"arr","type":{"type":"array","items":"long"}},
  {"name":"oarr","type":{"type":"array","items":["null","double"]}},
  {"name":"recs","type":{"type":"array","items":"Inner"}},
  {"name":"nested","type":{"type":"array","items":{"type":"array","items":"Color"}}},
  {"name":"m","type":{"type":"map","values":"int"}},
  {"name":"om","type":["null",{"type":"map","values":["null","Inner"]}]},
  {"name":"mm","type":{"type":"map","values":{"type":"map","values":{"type":"string","logicalType":"uuid"}}}},
  {"name":"un","type":["null","int","string","Inner",{"type":"long","logicalType":"timestamp-millis"},"F5",{"type":"array","items":"boolean"}]},
  {"name":"un2","type":["int","string"]}]}`

// tapeSchemas are the schemas the fast path is compared on: the record
// above, schemas that are not records (one column, value), and top-level
// unions.
var tapeSchemas = []string{
	tapeRecord,
	`"string"`,
	`{"type":"bytes","logicalType":"decimal","precision":20,"scale":3}`,
	`{"type":"array","items":["null","string"]}`,
	`{"type":"map","values":"long"}`,
	`["null","long"]`,
	`["null",` + tapeRecord + `]`,
	`["int","string",{"type":"record","name":"R","fields":[{"name":"x","type":"double"}]}]`,
}

// TestTapeMatchesDecode is the property the fast path rests on: for
// random payloads of every type in the mapping table, appending the tape
// (DecodeTape, AppendTape) builds the same rows as appending the
// canonical value (Decode, AppendDecoded), and a corrupted payload fails
// both ways with the same error, or decodes to the same value.
func TestTapeMatchesDecode(t *testing.T) {
	for i, text := range tapeSchemas {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			schema := avro.MustParse(text)
			codec, err := NewAvroCodec(text, nil)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 12))
			payloads := make([][]byte, 300)
			for j := range payloads {
				payloads[j] = (&avroGen{rng: rng}).value(nil, schema)
			}
			compareTape(t, codec, codec.Type(), payloads)
			compareCorrupt(t, codec, rng, payloads)
		})
	}
}

// TestTapeHamba decodes payloads hamba/avro marshalled, with the fast
// path, into the values produced: a check of the generator above against
// an independent encoder.
func TestTapeHamba(t *testing.T) {
	const text = `{"type":"record","name":"R","fields":[
	  {"name":"id","type":"long"},{"name":"name","type":"string"},
	  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
	  {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
	  {"name":"note","type":["null","string"]},{"name":"tags","type":{"type":"array","items":"string"}},
	  {"name":"attrs","type":{"type":"map","values":"int"}}]}`
	payload, err := avro.Marshal(avro.MustParse(text), map[string]any{
		"id": int64(7), "name": "ü", "amount": big.NewRat(-1234, 100), "at": time.UnixMilli(1_700_000_000_123).UTC(),
		"note": nil, "tags": []string{"a", "b"}, "attrs": map[string]int{"k": 3}})
	if err != nil {
		t.Fatal(err)
	}
	codec, err := NewAvroCodec(text, nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := compareTape(t, codec, codec.Type(), [][]byte{payload})
	defer batch.Release()
	got := func(name string) arrow.Array { return batch.Column(batch.Schema().FieldIndices(name)[0]) }
	if v := got("id").(*array.Int64).Value(0); v != 7 {
		t.Errorf("id %d", v)
	}
	if v := got("name").(*array.String).Value(0); v != "ü" {
		t.Errorf("name %q", v)
	}
	if v := got("amount").(*array.Decimal128).Value(0).BigInt().Int64(); v != -1234 {
		t.Errorf("amount %d", v)
	}
	if v := got("at").(*array.Timestamp).Value(0); v != 1_700_000_000_123_000 {
		t.Errorf("at %d", v)
	}
	if !got("note").IsNull(0) {
		t.Error("note is not null")
	}
	if v := got("tags").String(); v != `[["a" "b"]]` {
		t.Errorf("tags %s", v)
	}
}

// TestTapeWidens appends records of an older schema version to rows built
// for the merged schema (MergeType: int to long, float to double, a
// decimal to a larger precision, fields the older version lacks): the
// fast path fills the same rows as AppendDecoded.
func TestTapeWidens(t *testing.T) {
	const v1 = `{"type":"record","name":"R","fields":[
	  {"name":"n","type":"int"},{"name":"x","type":"float"},
	  {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":5,"scale":2}},
	  {"name":"in","type":{"type":"record","name":"In","fields":[{"name":"a","type":"int"}]}},
	  {"name":"l","type":{"type":"array","items":"int"}},
	  {"name":"m","type":{"type":"map","values":"float"}}]}`
	const v2 = `{"type":"record","name":"R","fields":[
	  {"name":"first","type":"string"},
	  {"name":"n","type":"long"},{"name":"x","type":"double"},
	  {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
	  {"name":"in","type":{"type":"record","name":"In","fields":[{"name":"b","type":"string"},{"name":"a","type":"long"}]}},
	  {"name":"l","type":{"type":"array","items":"long"}},
	  {"name":"m","type":{"type":"map","values":"double"}},
	  {"name":"last","type":"boolean"}]}`
	old, err := NewAvroCodec(v1, nil)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := NewAvroCodec(v2, nil)
	if err != nil {
		t.Fatal(err)
	}
	writer, _, err := MergeType("", newer.Type(), old.Type())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	schema := avro.MustParse(v1)
	payloads := make([][]byte, 200)
	for j := range payloads {
		payloads[j] = (&avroGen{rng: rng}).value(nil, schema)
	}
	compareTape(t, old, writer, payloads).Release()
}

// TestTapeNoFastPath: rows whose column cannot take the codec's values
// (a type MergeType would not have made) are refused when the appender is
// compiled, before any row.
func TestTapeNoFastPath(t *testing.T) {
	codec, err := NewAvroCodec(`{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, writer := range []*iceberg.StructType{
		st(field("a", tInt)),
		st(field("b", tLong)),
	} {
		rb := tapeRows(t, writer)
		if _, err := rb.NewValueAppender(codec.Type()); !errors.Is(err, ErrNoFastPath) {
			t.Errorf("writer %s: %v, want ErrNoFastPath", writer, err)
		}
		rb.Release()
	}
}

// tapeRows returns a row builder of a registry table whose value columns
// are values (a struct) or, for another type, one column named value.
func tapeRows(t *testing.T, values iceberg.Type) *RowBuilder {
	t.Helper()
	st, ok := values.(*iceberg.StructType)
	if !ok {
		st = &iceberg.StructType{FieldList: []iceberg.NestedField{{ID: 1, Name: ColValue, Type: values}}}
	}
	l := Layout{Value: ValueRegistry}
	sc, err := WriterArrowSchema(l.WriterSchema(nil, st))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := l.NewRowBuilder(memory.NewGoAllocator(), sc)
	if err != nil {
		t.Fatal(err)
	}
	return rb
}

// compareTape appends every payload both ways to rows whose value columns
// are writer's and fails unless the batches are equal; it returns the
// fast path's batch.
func compareTape(t *testing.T, codec Codec, writer iceberg.Type, payloads [][]byte) arrow.RecordBatch {
	t.Helper()
	tc := codec.(TapeCodec)
	slow, fast := tapeRows(t, writer), tapeRows(t, writer)
	defer slow.Release()
	defer fast.Release()
	va, err := fast.NewValueAppender(codec.Type())
	if err != nil {
		t.Fatal(err)
	}
	_, wrapped := codec.Type().(*iceberg.StructType)
	wrapped = !wrapped
	var tape Tape
	for j, p := range payloads {
		r := &kgo.Record{Topic: "t", Offset: int64(j), Value: p, Timestamp: time.UnixMilli(int64(j))}
		v, err := codec.Decode(p)
		if err != nil {
			t.Fatalf("payload %d: decode: %v", j, err)
		}
		if err := CheckValue("", codec.Type(), false, v); err != nil {
			t.Fatalf("payload %d: %v", j, err)
		}
		row, _ := v.(map[string]any)
		if wrapped {
			row = map[string]any{ColValue: v}
		}
		if err := slow.AppendDecoded(r, nil, row); err != nil {
			t.Fatal(err)
		}
		if err := tc.DecodeTape(p, &tape); err != nil {
			t.Fatalf("payload %d: decode onto a tape: %v", j, err)
		}
		if err := fast.AppendTape(r, nil, va, &tape); err != nil {
			t.Fatal(err)
		}
	}
	want, got := slow.NewBatch(), fast.NewBatch()
	defer want.Release()
	if !array.RecordEqual(want, got) {
		for c := range want.Columns() {
			if !array.Equal(want.Column(c), got.Column(c)) {
				t.Errorf("column %s:\nDecode: %v\ntape:   %v", want.ColumnName(c), want.Column(c), got.Column(c))
			}
		}
		t.FailNow()
	}
	return got
}

// compareCorrupt truncates payloads and flips their bytes: DecodeTape
// refuses exactly what Decode refuses, with the same error, and what both
// accept still appends alike.
func compareCorrupt(t *testing.T, codec Codec, rng *rand.Rand, payloads [][]byte) {
	t.Helper()
	tc := codec.(TapeCodec)
	var tape Tape
	var accepted [][]byte
	refused := 0
	for _, p := range payloads {
		bad := append([]byte{}, p...)
		switch rng.IntN(3) {
		case 0:
			bad = bad[:rng.IntN(len(bad)+1)]
		case 1:
			if len(bad) > 0 {
				bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
			}
		case 2:
			bad = append(bad, byte(rng.IntN(256)))
		}
		_, slowErr := codec.Decode(bad)
		fastErr := tc.DecodeTape(bad, &tape)
		switch {
		case (slowErr == nil) != (fastErr == nil):
			t.Fatalf("payload %x: Decode: %v, DecodeTape: %v", bad, slowErr, fastErr)
		case slowErr != nil && slowErr.Error() != fastErr.Error():
			t.Fatalf("payload %x: Decode: %v, DecodeTape: %v", bad, slowErr, fastErr)
		case slowErr == nil:
			accepted = append(accepted, bad)
		default:
			refused++
			if _, ok := fastErr.(*DecodeError); !ok {
				t.Fatalf("payload %x: %T, want *DecodeError", bad, fastErr)
			}
		}
	}
	if refused == 0 {
		t.Error("no corrupted payload was refused")
	}
	if len(accepted) > 0 {
		compareTape(t, codec, codec.Type(), accepted).Release()
	}
}

// avroGen writes random valid Avro binary values of a schema: values
// across each type's range (and, for logical types, the range floe
// accepts), arrays and maps in several blocks, some with byte sizes
// (negative counts), decimals in minimal and sign-extended encodings.
type avroGen struct {
	rng   *rand.Rand
	depth int
}

func (g *avroGen) long(b []byte, v int64) []byte {
	return binary.AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

func (g *avroGen) bytes(b, v []byte) []byte { return append(g.long(b, int64(len(v))), v...) }

// text returns a random string of ASCII and multi-byte characters.
func (g *avroGen) text() string {
	runes := []rune("aZ0 _é€😀ß")
	out := make([]rune, g.rng.IntN(12))
	for i := range out {
		out[i] = runes[g.rng.IntN(len(runes))]
	}
	return string(out)
}

// unscaled returns a random unscaled decimal of at most prec digits.
func (g *avroGen) unscaled(prec int) *big.Int {
	digits := 1 + g.rng.IntN(prec)
	n := new(big.Int)
	for range digits {
		n.Mul(n, big.NewInt(10))
		n.Add(n, big.NewInt(int64(g.rng.IntN(10))))
	}
	if g.rng.IntN(2) == 0 {
		n.Neg(n)
	}
	return n
}

// twos returns n in big-endian two's complement in size bytes (0: the
// fewest that hold it).
func twos(n *big.Int, size int) []byte {
	if size == 0 {
		size = n.BitLen()/8 + 1
	}
	v := new(big.Int).Set(n)
	if v.Sign() < 0 {
		v.Add(v, new(big.Int).Lsh(big.NewInt(1), uint(8*size)))
	}
	out := make([]byte, size)
	return v.FillBytes(out)
}

// blocks writes n items in blocks of random sizes, some with their byte
// size.
func (g *avroGen) blocks(b []byte, n int, item func(b []byte, i int) []byte) []byte {
	for i := 0; i < n; {
		k := 1 + g.rng.IntN(n-i)
		var body []byte
		for j := range k {
			body = item(body, i+j)
		}
		if g.rng.IntN(2) == 0 {
			b = g.long(b, int64(k))
		} else {
			b = g.long(g.long(b, -int64(k)), int64(len(body)))
		}
		b = append(b, body...)
		i += k
	}
	return g.long(b, 0)
}

func (g *avroGen) value(b []byte, s avro.Schema) []byte {
	s = derefAvro(s)
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		switch l := ls.Logical(); l.Type() {
		case avro.Date:
			return g.long(b, g.rng.Int64N(2_000_000)-1_000_000)
		case avro.TimeMillis:
			return g.long(b, g.rng.Int64N(86_400_000))
		case avro.TimeMicros:
			return g.long(b, g.rng.Int64N(86_400_000_000))
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return g.long(b, g.rng.Int64N(math.MaxInt64/1000)*int64(1-2*g.rng.IntN(2)))
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return g.long(b, int64(g.rng.Uint64()))
		case avro.UUID:
			return g.bytes(b, []byte(uuid.New().String()))
		case avro.Decimal:
			n := g.unscaled(l.(*avro.DecimalLogicalSchema).Precision())
			if f, ok := s.(*avro.FixedSchema); ok {
				return append(b, twos(n, f.Size())...)
			}
			size := 0
			if g.rng.IntN(4) == 0 {
				size = 17 + g.rng.IntN(4) // sign-extended past 128 bits
			}
			return g.bytes(b, twos(n, size))
		}
	}
	switch s := s.(type) {
	case *avro.NullSchema:
		return b
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Boolean:
			return append(b, byte(g.rng.IntN(2)))
		case avro.Int:
			return g.long(b, int64(int32(g.rng.Uint32())))
		case avro.Long:
			return g.long(b, int64(g.rng.Uint64())>>g.rng.IntN(64))
		case avro.Float:
			return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(g.rng.NormFloat64()*1e6)))
		case avro.Double:
			return binary.LittleEndian.AppendUint64(b, math.Float64bits(g.rng.NormFloat64()*1e12))
		case avro.String:
			return g.bytes(b, []byte(g.text()))
		case avro.Bytes:
			v := make([]byte, g.rng.IntN(6))
			for i := range v {
				v[i] = byte(g.rng.IntN(256))
			}
			return g.bytes(b, v)
		}
	case *avro.FixedSchema:
		for range s.Size() {
			b = append(b, byte(g.rng.IntN(256)))
		}
		return b
	case *avro.EnumSchema:
		return g.long(b, int64(g.rng.IntN(len(s.Symbols()))))
	case *avro.RecordSchema:
		for _, f := range s.Fields() {
			b = g.value(b, f.Type())
		}
		return b
	case *avro.ArraySchema:
		g.depth++
		defer func() { g.depth-- }()
		return g.blocks(b, g.count(), func(b []byte, _ int) []byte { return g.value(b, s.Items()) })
	case *avro.MapSchema:
		g.depth++
		defer func() { g.depth-- }()
		return g.blocks(b, g.count(), func(b []byte, i int) []byte {
			return g.value(g.bytes(b, fmt.Appendf(nil, "k%d-%s", i, g.text())), s.Values())
		})
	case *avro.UnionSchema:
		i := g.rng.IntN(len(s.Types()))
		return g.value(g.long(b, int64(i)), s.Types()[i])
	}
	panic(fmt.Sprintf("avroGen: schema %s", s.Type()))
}

// count returns the number of items of an array or map: fewer deeper
// down, sometimes none, and now and then more than a map's keys are
// searched without a set (mapKeys).
func (g *avroGen) count() int {
	switch {
	case g.depth > 2:
		return g.rng.IntN(2)
	case g.depth == 1 && g.rng.IntN(10) == 0:
		return 9 + g.rng.IntN(12)
	}
	return g.rng.IntN(5)
}
