package mapping

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// compileMessage compiles .proto sources the way a producer's build would
// and returns the message named name, to produce payloads with dynamicpb.
func compileMessage(t testing.TB, files map[string]string, file string, name protoreflect.FullName) protoreflect.MessageDescriptor {
	t.Helper()
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(files)})}
	fds, err := c.Compile(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	d := fds[0].FindDescriptorByName(name)
	if d == nil {
		t.Fatalf("no message %s", name)
	}
	return d.(protoreflect.MessageDescriptor)
}

const protoAll = `syntax = "proto3";
package test;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/any.proto";

enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }
message Inner { int32 a = 1; string b = 2; }

message All {
  Inner inner = 1;
  repeated int64 longs = 2;
  map<string, int32> counts = 3;
  oneof choice { string text = 4; int64 number = 5; }
  Color color = 6;
  google.protobuf.Timestamp at = 7;
  google.protobuf.Duration took = 8;
  google.protobuf.DoubleValue w_double = 9;
  google.protobuf.FloatValue w_float = 10;
  google.protobuf.Int64Value w_int64 = 11;
  google.protobuf.UInt64Value w_uint64 = 12;
  google.protobuf.Int32Value w_int32 = 13;
  google.protobuf.UInt32Value w_uint32 = 14;
  google.protobuf.BoolValue w_bool = 15;
  google.protobuf.StringValue w_string = 16;
  google.protobuf.BytesValue w_bytes = 17;
  int32 i32 = 18;
  sint32 s32 = 19;
  sfixed32 sf32 = 20;
  uint32 u32 = 21;
  fixed32 f32 = 22;
  int64 i64 = 23;
  sint64 s64 = 24;
  sfixed64 sf64 = 25;
  uint64 u64 = 26;
  fixed64 f64 = 27;
  float fl = 28;
  double db = 29;
  bool bo = 30;
  string st = 31;
  bytes by = 32;
  optional int32 maybe = 33;
  google.protobuf.Struct attrs = 34;
  google.protobuf.Empty nothing = 35;
  repeated Inner inners = 36;
  google.protobuf.Value json_value = 37;
  google.protobuf.ListValue json_list = 38;
  google.protobuf.Any packed = 39;
}
`

// TestProtobufMapping checks one row of the Protobuf mapping table
// (docs/typed-tables.md) per case: a dynamicpb message with one field set,
// marshalled, decoded by the codec, gives that field's canonical value and
// Iceberg type.
func TestProtobufMapping(t *testing.T) {
	files := map[string]string{"all.proto": protoAll}
	md := compileMessage(t, files, "all.proto", "test.All")
	codec, err := NewProtobufCodec(files, "all.proto", []int{1}) // All is the second message
	if err != nil {
		t.Fatal(err)
	}
	fd := func(name string) protoreflect.FieldDescriptor { return md.Fields().ByName(protoreflect.Name(name)) }
	set := func(name string, v protoreflect.Value) func(protoreflect.Message) {
		return func(m protoreflect.Message) { m.Set(fd(name), v) }
	}
	// wrapper sets a wrapper message's value.
	wrapper := func(name string, v protoreflect.Value) func(protoreflect.Message) {
		return func(m protoreflect.Message) {
			w := m.Mutable(fd(name)).Message()
			w.Set(w.Descriptor().Fields().ByName("value"), v)
		}
	}
	// seconds sets a Timestamp's or Duration's fields.
	seconds := func(name string, s, n int64) func(protoreflect.Message) {
		return func(m protoreflect.Message) {
			w := m.Mutable(fd(name)).Message()
			w.Set(w.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(s))
			w.Set(w.Descriptor().Fields().ByName("nanos"), protoreflect.ValueOfInt32(int32(n)))
		}
	}
	maxU64 := iceberg.Decimal{Val: decimal128.FromU64(math.MaxUint64), Scale: 0}
	for _, c := range []struct {
		row      string
		field    string
		set      func(protoreflect.Message)
		wantType iceberg.Type
		want     any // nil: null
	}{
		{"message → struct", "inner", func(m protoreflect.Message) {
			in := m.Mutable(fd("inner")).Message()
			in.Set(in.Descriptor().Fields().ByName("a"), protoreflect.ValueOfInt32(3))
			in.Set(in.Descriptor().Fields().ByName("b"), protoreflect.ValueOfString("x"))
		}, st(field("a", tInt), field("b", tString)), map[string]any{"a": int32(3), "b": "x"}},
		{"message absent → null", "inner", func(protoreflect.Message) {}, st(field("a", tInt), field("b", tString)), nil},
		{"repeated → list", "longs", func(m protoreflect.Message) {
			l := m.Mutable(fd("longs")).List()
			l.Append(protoreflect.ValueOfInt64(1))
			l.Append(protoreflect.ValueOfInt64(-2))
		}, &iceberg.ListType{Element: tLong}, []any{int64(1), int64(-2)}},
		{"repeated message → list of struct", "inners", func(m protoreflect.Message) {
			l := m.Mutable(fd("inners")).List()
			e := l.NewElement()
			e.Message().Set(e.Message().Descriptor().Fields().ByName("a"), protoreflect.ValueOfInt32(5))
			l.Append(e)
		}, &iceberg.ListType{Element: st(field("a", tInt), field("b", tString))}, []any{map[string]any{"a": int32(5), "b": ""}}},
		{"map → map (sorted by key)", "counts", func(m protoreflect.Message) {
			mp := m.Mutable(fd("counts")).Map()
			mp.Set(protoreflect.ValueOfString("b").MapKey(), protoreflect.ValueOfInt32(2))
			mp.Set(protoreflect.ValueOfString("a").MapKey(), protoreflect.ValueOfInt32(1))
		}, &iceberg.MapType{KeyType: tString, ValueType: tInt}, []MapEntry{{Key: "a", Value: int32(1)}, {Key: "b", Value: int32(2)}}},
		{"oneof → the member set", "number", set("number", protoreflect.ValueOfInt64(42)), tLong, int64(42)},
		{"oneof → the members not set are null", "text", set("number", protoreflect.ValueOfInt64(42)), tString, nil},
		{"enum → string (the value's name)", "color", set("color", protoreflect.ValueOfEnum(2)), tString, "GREEN"},
		{"enum number the schema does not name → the number", "color", set("color", protoreflect.ValueOfEnum(7)), tString, "7"},
		{"google.protobuf.Timestamp → timestamptz", "at", seconds("at", 1_700_000_000, 123_456_789), tTsTz, iceberg.Timestamp(1_700_000_000_123_456)},
		{"google.protobuf.Duration → long microseconds", "took", seconds("took", -90, -500_000_000), tLong, int64(-90_500_000)},
		{"DoubleValue → optional double", "w_double", wrapper("w_double", protoreflect.ValueOfFloat64(2.5)), tDouble, 2.5},
		{"FloatValue → optional float", "w_float", wrapper("w_float", protoreflect.ValueOfFloat32(1.5)), iceberg.PrimitiveTypes.Float32, float32(1.5)},
		{"Int64Value → optional long", "w_int64", wrapper("w_int64", protoreflect.ValueOfInt64(-8)), tLong, int64(-8)},
		{"UInt64Value → optional decimal(20,0)", "w_uint64", wrapper("w_uint64", protoreflect.ValueOfUint64(math.MaxUint64)), iceberg.DecimalTypeOf(20, 0), maxU64},
		{"Int32Value → optional int", "w_int32", wrapper("w_int32", protoreflect.ValueOfInt32(-3)), tInt, int32(-3)},
		{"UInt32Value → optional long", "w_uint32", wrapper("w_uint32", protoreflect.ValueOfUint32(math.MaxUint32)), tLong, int64(math.MaxUint32)},
		{"BoolValue → optional boolean", "w_bool", wrapper("w_bool", protoreflect.ValueOfBool(false)), tBool, false},
		{"StringValue → optional string", "w_string", wrapper("w_string", protoreflect.ValueOfString("")), tString, ""},
		{"BytesValue → optional binary", "w_bytes", wrapper("w_bytes", protoreflect.ValueOfBytes([]byte{1})), tBytes, []byte{1}},
		{"a wrapper absent → null", "w_int32", func(protoreflect.Message) {}, tInt, nil},
		{"int32 → int", "i32", set("i32", protoreflect.ValueOfInt32(math.MinInt32)), tInt, int32(math.MinInt32)},
		{"sint32 → int", "s32", set("s32", protoreflect.ValueOfInt32(-7)), tInt, int32(-7)},
		{"sfixed32 → int", "sf32", set("sf32", protoreflect.ValueOfInt32(-9)), tInt, int32(-9)},
		{"uint32 → long", "u32", set("u32", protoreflect.ValueOfUint32(math.MaxUint32)), tLong, int64(math.MaxUint32)},
		{"fixed32 → long", "f32", set("f32", protoreflect.ValueOfUint32(math.MaxUint32)), tLong, int64(math.MaxUint32)},
		{"int64 → long", "i64", set("i64", protoreflect.ValueOfInt64(math.MinInt64)), tLong, int64(math.MinInt64)},
		{"sint64 → long", "s64", set("s64", protoreflect.ValueOfInt64(-1)), tLong, int64(-1)},
		{"sfixed64 → long", "sf64", set("sf64", protoreflect.ValueOfInt64(math.MaxInt64)), tLong, int64(math.MaxInt64)},
		{"uint64 → decimal(20,0)", "u64", set("u64", protoreflect.ValueOfUint64(math.MaxUint64)), iceberg.DecimalTypeOf(20, 0), maxU64},
		{"fixed64 → decimal(20,0)", "f64", set("f64", protoreflect.ValueOfUint64(1)), iceberg.DecimalTypeOf(20, 0),
			iceberg.Decimal{Val: decimal128.FromU64(1), Scale: 0}},
		{"float → float", "fl", set("fl", protoreflect.ValueOfFloat32(0.25)), iceberg.PrimitiveTypes.Float32, float32(0.25)},
		{"double → double", "db", set("db", protoreflect.ValueOfFloat64(1e300)), tDouble, 1e300},
		{"bool → boolean", "bo", set("bo", protoreflect.ValueOfBool(true)), tBool, true},
		{"string → string", "st", set("st", protoreflect.ValueOfString("héllo")), tString, "héllo"},
		{"bytes → binary", "by", set("by", protoreflect.ValueOfBytes([]byte{0, 255})), tBytes, []byte{0, 255}},
		{"proto3 scalar without presence, absent → its default", "i64", func(protoreflect.Message) {}, tLong, int64(0)},
		{"proto3 enum without presence, absent → the name of 0", "color", func(protoreflect.Message) {}, tString, "COLOR_UNSPECIFIED"},
		{"repeated, absent → empty list", "longs", func(protoreflect.Message) {}, &iceberg.ListType{Element: tLong}, []any{}},
		{"proto3 optional, absent → null", "maybe", func(protoreflect.Message) {}, tInt, nil},
		{"proto3 optional, set to 0 → 0", "maybe", set("maybe", protoreflect.ValueOfInt32(0)), tInt, int32(0)},
		{"google.protobuf.Struct → string (JSON)", "attrs", func(m protoreflect.Message) {
			s := m.Mutable(fd("attrs")).Message()
			fields := s.Mutable(s.Descriptor().Fields().ByName("fields")).Map()
			v := fields.NewValue()
			v.Message().Set(v.Message().Descriptor().Fields().ByName("number_value"), protoreflect.ValueOfFloat64(2))
			fields.Set(protoreflect.ValueOfString("z").MapKey(), v)
			w := fields.NewValue()
			w.Message().Set(w.Message().Descriptor().Fields().ByName("string_value"), protoreflect.ValueOfString("x"))
			fields.Set(protoreflect.ValueOfString("a").MapKey(), w)
		}, tString, `{"a":"x","z":2}`},
		{"google.protobuf.Value → string (JSON)", "json_value", func(m protoreflect.Message) {
			v := m.Mutable(fd("json_value")).Message()
			v.Set(v.Descriptor().Fields().ByName("bool_value"), protoreflect.ValueOfBool(true))
		}, tString, `true`},
		{"google.protobuf.ListValue → string (JSON)", "json_list", func(m protoreflect.Message) {
			l := m.Mutable(fd("json_list")).Message()
			values := l.Mutable(l.Descriptor().Fields().ByName("values")).List()
			e := values.NewElement()
			e.Message().Set(e.Message().Descriptor().Fields().ByName("string_value"), protoreflect.ValueOfString("x"))
			values.Append(e)
		}, tString, `["x"]`},
		{"other well-known types (Any) → struct", "packed", func(m protoreflect.Message) {
			a := m.Mutable(fd("packed")).Message()
			a.Set(a.Descriptor().Fields().ByName("type_url"), protoreflect.ValueOfString("type.googleapis.com/test.Inner"))
			a.Set(a.Descriptor().Fields().ByName("value"), protoreflect.ValueOfBytes([]byte{8, 1}))
		}, st(field("type_url", tString), field("value", tBytes)), map[string]any{"type_url": "type.googleapis.com/test.Inner", "value": []byte{8, 1}}},
	} {
		t.Run(c.row, func(t *testing.T) {
			m := dynamicpb.NewMessage(md)
			c.set(m)
			payload, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			v, err := codec.Decode(payload)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckValue("", codec.Type(), false, v); err != nil {
				t.Fatal(err)
			}
			f, ok := FindField(codec.Type().(*iceberg.StructType), c.field)
			if !ok {
				t.Fatalf("no column %s", c.field)
			}
			if got := withoutIDs(f.Type); !got.Equals(c.wantType) {
				t.Errorf("type %s, want %s", got, c.wantType)
			}
			got, present := v.(map[string]any)[c.field]
			if (c.want == nil) == present || (present && !reflect.DeepEqual(got, c.want)) {
				t.Errorf("decoded %#v (present %v), want %#v", got, present, c.want)
			}
		})
	}
	if _, ok := FindField(codec.Type().(*iceberg.StructType), "nothing"); ok {
		t.Error("google.protobuf.Empty got a column")
	}
	if f, _ := FindField(codec.Type().(*iceberg.StructType), "took"); f.Doc == "" {
		t.Error("the Duration column has no doc naming its unit")
	}
}

const protoPayment = `syntax = "proto3";
package acme.payments.v1;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "money.proto";

message PaymentEvent {
  string payment_id = 1;
  google.protobuf.Timestamp occurred_at = 2;
  acme.common.Money amount = 3;
  oneof method {
    Card card = 4;
    BankTransfer bank_transfer = 5;
    string wallet = 6;
  }
  map<string, string> labels = 7;
  Status status = 8;
  google.protobuf.StringValue reference = 9;
  repeated Refund refunds = 10;

  enum Status { STATUS_UNSPECIFIED = 0; AUTHORIZED = 1; CAPTURED = 2; }
  message Card { string brand = 1; string last4 = 2; }
  message BankTransfer { string iban = 1; }
  message Refund { acme.common.Money amount = 1; google.protobuf.Timestamp at = 2; }
}
`

const protoMoney = `syntax = "proto3";
package acme.common;
message Money { string currency = 1; int64 units = 2; int32 nanos = 3; }
`

var paymentFiles = map[string]string{"payment.proto": protoPayment, "money.proto": protoMoney}

// TestProtobufGolden: the Iceberg schema of a message with a oneof, a map,
// Timestamps and a referenced file.
func TestProtobufGolden(t *testing.T) {
	c, err := NewProtobufCodec(paymentFiles, "payment.proto", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "protobuf_payment", c)
	checkAppend(t, c, paymentSample(t))
}

// TestProtobufIndexes: the wire format's message indexes pick a nested
// message. Confluent's Java serializers count the nested messages the
// schema declares; its Go ones also the entry message of each map field,
// which PaymentEvent's labels map puts first: Card, BankTransfer, Refund
// against LabelsEntry, Card, BankTransfer, Refund. Indexes that name a
// message one way only (a map entry is none) take it; indexes naming a
// different message each way are refused, not guessed (a review found a
// Java producer's Inner decoded as the map entry).
func TestProtobufIndexes(t *testing.T) {
	for _, c := range []struct {
		indexes []int
		message string
	}{
		{[]int{0, 0}, "Card"},   // Go: LabelsEntry
		{[]int{0, 3}, "Refund"}, // Java: out of range
		{[]int{0, 2}, ""},       // Java: Refund; Go: BankTransfer
	} {
		got, err := NewProtobufCodec(paymentFiles, "payment.proto", c.indexes)
		if c.message == "" {
			if err == nil || !strings.Contains(err.Error(), "floe cannot tell which the producer wrote") {
				t.Errorf("indexes %v: %v; want the ambiguity refused", c.indexes, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("indexes %v: %v", c.indexes, err)
		}
		want, err := NewProtobufCodec(map[string]string{"m.proto": "syntax = \"proto3\"; package acme.payments.v1; import \"money.proto\"; import \"google/protobuf/timestamp.proto\";\n" +
			messageText(c.message), "money.proto": protoMoney}, "m.proto", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Type().Equals(want.Type()) {
			t.Errorf("indexes %v: %s, want %s's %s", c.indexes, got.Type(), c.message, want.Type())
		}
	}
}

// messageText is the declaration of a nested message of PaymentEvent, as a
// top-level one.
func messageText(name string) string {
	for l := range strings.Lines(protoPayment) {
		if strings.HasPrefix(strings.TrimSpace(l), "message "+name+" ") {
			return strings.TrimSpace(l) + "\n"
		}
	}
	return ""
}

func TestProtobufSchemaErrors(t *testing.T) {
	for _, c := range []struct {
		name    string
		files   map[string]string
		indexes []int
		field   string
		problem string
	}{
		{"recursive message", map[string]string{"r.proto": `syntax = "proto3"; message Node { int32 v = 1; Node next = 2; }`}, nil,
			"next", "message Node contains itself"},
		{"index out of range", paymentFiles, []int{0, 9}, "", "message index 9 at depth 1"},
		{"missing import", map[string]string{"payment.proto": protoPayment}, nil, "", "money.proto"},
		{"syntax error", map[string]string{"r.proto": `syntax = "proto3"; message {`}, nil, "", "r.proto:1"},
		{"no field", map[string]string{"r.proto": `syntax = "proto3"; message E {}`}, nil, "", "message E has no field"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := "r.proto"
			if _, ok := c.files["payment.proto"]; ok {
				file = "payment.proto"
			}
			_, err := NewProtobufCodec(c.files, file, c.indexes)
			wantSchemaError(t, err, c.field, c.problem)
		})
	}
}

func TestProtobufDecodeErrors(t *testing.T) {
	files := map[string]string{"all.proto": protoAll}
	c, err := NewProtobufCodec(files, "all.proto", []int{1})
	if err != nil {
		t.Fatal(err)
	}
	md := compileMessage(t, files, "all.proto", "test.All")
	m := dynamicpb.NewMessage(md)
	ts := m.Mutable(md.Fields().ByName("at")).Message()
	ts.Set(ts.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(math.MaxInt64))
	payload, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"timestamp out of range", payload, "field at: google.protobuf.Timestamp of 9223372036854775807 s 0 ns is outside its valid range"},
		{"truncated", []byte{0x0a, 0x05, 0x08}, "decode protobuf"},
	} {
		_, err := c.Decode(tc.payload)
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want a DecodeError with %q", tc.name, err, tc.want)
		}
	}
}

// paymentSample returns a PaymentEvent marshalled from a dynamicpb message.
func paymentSample(t testing.TB) []byte {
	t.Helper()
	md := compileMessage(t, paymentFiles, "payment.proto", "acme.payments.v1.PaymentEvent")
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("payment_id"), protoreflect.ValueOfString("p-1"))
	m.Set(md.Fields().ByName("wallet"), protoreflect.ValueOfString("apple"))
	m.Mutable(md.Fields().ByName("labels")).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString("v"))
	at := m.Mutable(md.Fields().ByName("occurred_at")).Message()
	at.Set(at.Descriptor().Fields().ByName("seconds"), protoreflect.ValueOfInt64(1_700_000_000))
	refunds := m.Mutable(md.Fields().ByName("refunds")).List()
	r := refunds.NewElement()
	amount := r.Message().Mutable(r.Message().Descriptor().Fields().ByName("amount")).Message()
	amount.Set(amount.Descriptor().Fields().ByName("units"), protoreflect.ValueOfInt64(5))
	refunds.Append(r)
	payload, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

func FuzzProtobufDecode(f *testing.F) {
	c, err := NewProtobufCodec(paymentFiles, "payment.proto", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(paymentSample(f))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, payload []byte) { checkFuzzed(t, c, payload) })
}
