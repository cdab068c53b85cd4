package mapping

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/parser"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// protobufCodec decodes Protobuf payloads of one message type: the payload
// is unmarshalled into a dynamic message of the compiled descriptor, then
// walked field by field into the canonical representation.
type protobufCodec struct {
	typ  iceberg.Type
	msg  protoreflect.MessageType
	conv pbConv
}

// pbConv converts one protoreflect value of a field into a canonical value.
type pbConv func(v protoreflect.Value) (any, error)

// NewProtobufCodec returns the codec of one message of a Protobuf schema.
// files holds the .proto sources by file name, the schema's own file and
// those it imports (the registry's references); the well-known types'
// files (google/protobuf/timestamp.proto, ...) may be left out. file names
// the schema's file, and indexes the message as the wire format does: the
// index of a top-level message in the file, then of a nested message in it,
// and so on (messageAt); empty means the first message of the file.
func NewProtobufCodec(files map[string]string, file string, indexes []int) (Codec, error) {
	fail := func(err error) (Codec, error) { return nil, &SchemaError{Format: "protobuf", Err: err} }
	files = withKnownProtoFiles(files)
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(files),
	})}
	compiled, err := c.Compile(context.Background(), file)
	declared := err != nil && strings.Contains(err.Error(), "map_entry option should not be set explicitly")
	if declared {
		// Confluent's registry stored Java's map fields (2020-2024, and
		// Karapace still does) as the descriptor holds them: a repeated
		// field of a nested entry message with option map_entry, which
		// protocompile's source checks refuse. The descriptor it stands
		// for is an ordinary map field: compile it unchecked.
		c.Resolver = protocompile.WithStandardImports(declaredEntries(files))
		compiled, err = c.Compile(context.Background(), file)
	}
	if err != nil {
		return fail(err)
	}
	if len(indexes) == 0 {
		indexes = []int{0}
	}
	md, err := messageAt(compiled[0], file, indexes, declared)
	if err != nil {
		return fail(err)
	}
	b := pbBuilder{inProgress: map[protoreflect.FullName]bool{}}
	t, conv, err := b.message("", md)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return fail(fmt.Errorf("message %s has no field with a type Iceberg can hold", md.FullName()))
	}
	if t, err = finishType("protobuf", t); err != nil {
		return nil, err
	}
	return &protobufCodec{typ: t, msg: dynamicpb.NewMessageType(md), conv: conv}, nil
}

// messageAt returns the message that indexes name in fd. Confluent's
// serializers count nested messages two ways: its Java ones as the schema's
// text declares them, its Go ones as the descriptor holds them, with an
// entry message for each map field. The two agree unless a map field comes
// before the message; then the one way that names a message (a map entry
// is none) is taken, and indexes naming a different message each way are
// refused rather than guessed.
//
// With declared, the schema's text declares the entry messages itself, and
// both ways count them.
func messageAt(fd protoreflect.FileDescriptor, file string, indexes []int, declared bool) (protoreflect.MessageDescriptor, error) {
	walk := func(textual bool) (protoreflect.MessageDescriptor, error) {
		textual = textual && !declared
		var md protoreflect.MessageDescriptor
		msgs := fd.Messages()
		for depth, i := range indexes {
			var list []protoreflect.MessageDescriptor
			for j := range msgs.Len() {
				if m := msgs.Get(j); !textual || !m.IsMapEntry() {
					list = append(list, m)
				}
			}
			if i < 0 || i >= len(list) {
				return nil, &MessageIndexError{Indexes: indexes, Depth: depth, File: file, Messages: len(list)}
			}
			md = list[i]
			msgs = md.Messages()
		}
		if md.IsMapEntry() {
			return nil, fmt.Errorf("message indexes %v name %s, the entry message of a map field, which no producer writes", indexes, md.FullName())
		}
		return md, nil
	}
	text, textErr := walk(true)
	desc, descErr := walk(false)
	switch {
	case textErr == nil && descErr == nil && text != desc:
		return nil, fmt.Errorf("message indexes %v name %s as Confluent's Java serializers count messages (as the schema declares them), and %s as its Go serializers do (with each map field's entry message): a map field comes before it, so floe cannot tell which the producer wrote; declare nested messages before map fields",
			indexes, text.FullName(), desc.FullName())
	case textErr == nil:
		return text, nil
	case descErr == nil:
		return desc, nil
	}
	return nil, textErr
}

// declaredEntries resolves the files of a schema whose text declares map
// entry messages (option map_entry): parsed without protocompile's source
// checks, which refuse the option; the registry checked the schema, and
// the linker still checks each entry message's shape.
func declaredEntries(files map[string]string) protocompile.Resolver {
	return protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
		src, ok := files[path]
		if !ok {
			return protocompile.SearchResult{}, protoregistry.NotFound
		}
		h := reporter.NewHandler(nil)
		node, err := parser.Parse(path, strings.NewReader(src), h)
		if err != nil {
			return protocompile.SearchResult{}, err
		}
		res, err := parser.ResultFromAST(node, false, h)
		if err != nil {
			return protocompile.SearchResult{}, err
		}
		return protocompile.SearchResult{ParseResult: res}, nil
	})
}

// MessageIndexError reports Protobuf message indexes that name no message
// of the schema: the index at Depth is negative or not below Messages, the
// number of messages File has there.
type MessageIndexError struct {
	Indexes  []int
	Depth    int
	File     string
	Messages int
}

func (e *MessageIndexError) Error() string {
	return fmt.Sprintf("message index %d at depth %d (of indexes %v): %s has %d messages there",
		e.Indexes[e.Depth], e.Depth, e.Indexes, e.File, e.Messages)
}

func (c *protobufCodec) Type() iceberg.Type { return c.typ }

func (c *protobufCodec) Decode(payload []byte) (any, error) {
	m := c.msg.New()
	if err := proto.Unmarshal(payload, m.Interface()); err != nil {
		return nil, &DecodeError{Format: "protobuf", Err: err}
	}
	v, err := c.conv(protoreflect.ValueOfMessage(m))
	if err != nil {
		return nil, &DecodeError{Format: "protobuf", Err: err}
	}
	return v, nil
}

// pbBuilder turns message descriptors into Iceberg types and converters.
type pbBuilder struct {
	// inProgress holds the messages being built, to refuse recursive ones:
	// Iceberg types are finite trees.
	inProgress map[protoreflect.FullName]bool
	budget     typeBudget
}

// message maps a message to a struct of its fields in declaration order; a
// oneof's members are fields like the others, null but for the one set. A
// field with presence (message fields, oneof members, proto3 optional,
// proto2 optional) is null when absent; a proto3 scalar without presence
// holds its default when absent, as it does for every Protobuf reader (the
// wire cannot tell an absent 0 from a written one). The type is nil for a
// message with no fields (google.protobuf.Empty): the enclosing message
// leaves such a field out.
func (b *pbBuilder) message(path string, md protoreflect.MessageDescriptor) (iceberg.Type, pbConv, error) {
	if t, conv, ok := b.wellKnown(path, md); ok {
		return t, conv, nil
	}
	if b.inProgress[md.FullName()] {
		return nil, nil, &SchemaError{Format: "protobuf", Path: path,
			Err: fmt.Errorf("message %s contains itself; Iceberg has no recursive types", md.FullName())}
	}
	b.inProgress[md.FullName()] = true
	defer delete(b.inProgress, md.FullName())
	type field struct {
		fd   protoreflect.FieldDescriptor
		name string
		conv pbConv
	}
	st := &iceberg.StructType{}
	var fields []field
	fds := md.Fields()
	for i := range fds.Len() {
		fd := fds.Get(i)
		name := string(fd.Name())
		t, conv, err := b.field(joinPath(path, name), fd)
		if err != nil {
			return nil, nil, err
		}
		if t == nil {
			continue
		}
		f := optional(name, t)
		if fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Duration" && !fd.IsList() && !fd.IsMap() {
			f.Doc = "google.protobuf.Duration in microseconds"
		}
		st.FieldList = append(st.FieldList, f)
		fields = append(fields, field{fd: fd, name: name, conv: conv})
	}
	if len(fields) == 0 {
		return nil, nil, nil
	}
	return st, func(v protoreflect.Value) (any, error) {
		m := v.Message()
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			if f.fd.HasPresence() && !m.Has(f.fd) {
				continue
			}
			c, err := f.conv(m.Get(f.fd))
			if err != nil {
				return nil, err
			}
			if c != nil {
				out[f.name] = c
			}
		}
		return out, nil
	}, nil
}

// field maps a field: repeated to a list, map to a map (entries sorted by
// key, since Protobuf maps have no order), anything else to its value's
// type.
func (b *pbBuilder) field(path string, fd protoreflect.FieldDescriptor) (iceberg.Type, pbConv, error) {
	if err := b.budget.spend("protobuf", path); err != nil {
		return nil, nil, err
	}
	switch {
	case fd.IsMap():
		kt, kconv, err := b.value(joinPath(path, "key"), fd.MapKey())
		if err != nil {
			return nil, nil, err
		}
		vt, vconv, err := b.value(joinPath(path, "value"), fd.MapValue())
		if err != nil || vt == nil {
			return nil, nil, err
		}
		return mapOf(kt, vt), func(v protoreflect.Value) (any, error) {
			m := v.Map()
			keys := make([]protoreflect.MapKey, 0, m.Len())
			m.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			slices.SortFunc(keys, compareMapKeys)
			out := make([]MapEntry, len(keys))
			for i, k := range keys {
				kc, err := kconv(k.Value())
				if err != nil {
					return nil, err
				}
				vc, err := vconv(m.Get(k))
				if err != nil {
					return nil, err
				}
				out[i] = MapEntry{Key: kc, Value: vc}
			}
			return out, nil
		}, nil
	case fd.IsList():
		et, econv, err := b.value(joinPath(path, "element"), fd)
		if err != nil || et == nil {
			return nil, nil, err
		}
		return listOf(et), func(v protoreflect.Value) (any, error) {
			l := v.List()
			out := make([]any, l.Len())
			for i := range out {
				c, err := econv(l.Get(i))
				if err != nil {
					return nil, err
				}
				out[i] = c
			}
			return out, nil
		}, nil
	}
	return b.value(path, fd)
}

// compareMapKeys orders map keys of one kind: strings, signed or
// unsigned integers, or booleans (false first).
func compareMapKeys(a, b protoreflect.MapKey) int {
	switch a.Interface().(type) {
	case string:
		return cmp.Compare(a.String(), b.String())
	case int32, int64:
		return cmp.Compare(a.Int(), b.Int())
	case uint32, uint64:
		return cmp.Compare(a.Uint(), b.Uint())
	case bool:
		if a.Bool() == b.Bool() {
			return 0
		}
		if b.Bool() {
			return -1
		}
		return 1
	}
	return 0
}

// value maps one value of a field's kind, ignoring cardinality.
func (b *pbBuilder) value(path string, fd protoreflect.FieldDescriptor) (iceberg.Type, pbConv, error) {
	wrap := func(err error) error { return fieldErr(path, err) }
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return iceberg.PrimitiveTypes.Bool, func(v protoreflect.Value) (any, error) { return v.Bool(), nil }, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return iceberg.PrimitiveTypes.Int32, func(v protoreflect.Value) (any, error) { return int32(v.Int()), nil }, nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return iceberg.PrimitiveTypes.Int64, func(v protoreflect.Value) (any, error) { return int64(v.Uint()), nil }, nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return iceberg.PrimitiveTypes.Int64, func(v protoreflect.Value) (any, error) { return v.Int(), nil }, nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return uint64Type, func(v protoreflect.Value) (any, error) { return uint64Decimal(v.Uint()), nil }, nil
	case protoreflect.FloatKind:
		return iceberg.PrimitiveTypes.Float32, func(v protoreflect.Value) (any, error) { return float32(v.Float()), nil }, nil
	case protoreflect.DoubleKind:
		return iceberg.PrimitiveTypes.Float64, func(v protoreflect.Value) (any, error) { return v.Float(), nil }, nil
	case protoreflect.StringKind:
		return iceberg.PrimitiveTypes.String, func(v protoreflect.Value) (any, error) {
			s := v.String()
			if !utf8.ValidString(s) { // proto2 strings are not checked on the wire
				return nil, wrap(errors.New("string is not valid UTF-8"))
			}
			return s, nil
		}, nil
	case protoreflect.BytesKind:
		// proto.Unmarshal copies bytes fields out of the payload.
		return iceberg.PrimitiveTypes.Binary, func(v protoreflect.Value) (any, error) { return v.Bytes(), nil }, nil
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		return iceberg.PrimitiveTypes.String, func(v protoreflect.Value) (any, error) {
			if ev := values.ByNumber(v.Enum()); ev != nil {
				return string(ev.Name()), nil
			}
			// Enums are open: a producer may write a number this schema
			// does not name. Keep the number rather than lose the value.
			return strconv.Itoa(int(v.Enum())), nil
		}, nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return b.message(path, fd.Message())
	}
	return nil, nil, &SchemaError{Format: "protobuf", Path: path, Err: fmt.Errorf("field kind %s has no Iceberg type", fd.Kind())}
}

// uint64Type holds every uint64 exactly: a long would turn values from
// 2^63 up negative.
var uint64Type = iceberg.DecimalTypeOf(20, 0)

func uint64Decimal(u uint64) iceberg.Decimal {
	return iceberg.Decimal{Val: decimal128.FromU64(u), Scale: 0}
}

// Ranges Protobuf documents for google.protobuf.Timestamp and Duration.
const (
	minTimestampSeconds = -62135596800 // 0001-01-01T00:00:00Z
	maxTimestampSeconds = 253402300799 // 9999-12-31T23:59:59Z
	maxDurationSeconds  = 315576000000 // 10,000 years
)

// wellKnown maps Protobuf's well-known types that are not plain structs:
// Timestamp to timestamptz; Duration to long microseconds (Iceberg has no
// interval type, and microseconds are what its timestamps count, so
// durations and timestamp differences compare directly); the wrappers
// (Int32Value, StringValue, ...) to their value's type, null when the field
// is absent; Struct, Value and ListValue, which are recursive and so have
// no Iceberg type, to their JSON text in a string. Other well-known types
// (Any, FieldMask, ...) are ordinary messages.
func (b *pbBuilder) wellKnown(path string, md protoreflect.MessageDescriptor) (iceberg.Type, pbConv, bool) {
	wrap := func(err error) error { return fieldErr(path, err) }
	fields := md.Fields()
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		secs, nanos := fields.ByNumber(1), fields.ByNumber(2)
		return iceberg.PrimitiveTypes.TimestampTz, func(v protoreflect.Value) (any, error) {
			m := v.Message()
			s, n := m.Get(secs).Int(), m.Get(nanos).Int()
			if s < minTimestampSeconds || s > maxTimestampSeconds || n < 0 || n >= 1e9 {
				return nil, wrap(fmt.Errorf("google.protobuf.Timestamp of %d s %d ns is outside its valid range", s, n))
			}
			return iceberg.Timestamp(s*1_000_000 + n/1000), nil
		}, true
	case "google.protobuf.Duration":
		secs, nanos := fields.ByNumber(1), fields.ByNumber(2)
		return iceberg.PrimitiveTypes.Int64, func(v protoreflect.Value) (any, error) {
			m := v.Message()
			s, n := m.Get(secs).Int(), m.Get(nanos).Int()
			if s < -maxDurationSeconds || s > maxDurationSeconds || n <= -1e9 || n >= 1e9 || (s > 0 && n < 0) || (s < 0 && n > 0) {
				return nil, wrap(fmt.Errorf("google.protobuf.Duration of %d s %d ns is outside its valid range", s, n))
			}
			return s*1_000_000 + n/1000, nil
		}, true
	case "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
		"google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		value := fields.ByNumber(1)
		t, conv, _ := b.value(path, value) // a scalar, which always maps
		return t, func(v protoreflect.Value) (any, error) { return conv(v.Message().Get(value)) }, true
	case "google.protobuf.Struct":
		return jsonText(path, func() proto.Message { return &structpb.Struct{} }, func(m proto.Message) any { return m.(*structpb.Struct).AsMap() })
	case "google.protobuf.Value":
		return jsonText(path, func() proto.Message { return &structpb.Value{} }, func(m proto.Message) any { return m.(*structpb.Value).AsInterface() })
	case "google.protobuf.ListValue":
		return jsonText(path, func() proto.Message { return &structpb.ListValue{} }, func(m proto.Message) any { return m.(*structpb.ListValue).AsSlice() })
	}
	return nil, nil, false
}

// jsonText maps a google.protobuf.Struct, Value or ListValue to a string
// of its JSON: the dynamic message is re-read as the generated type, whose
// Go value encoding/json writes with sorted keys.
func jsonText(path string, newMsg func() proto.Message, asGo func(proto.Message) any) (iceberg.Type, pbConv, bool) {
	return iceberg.PrimitiveTypes.String, func(v protoreflect.Value) (any, error) {
		b, err := proto.Marshal(v.Message().Interface())
		if err == nil {
			m := newMsg()
			if err = proto.Unmarshal(b, m); err == nil {
				var text []byte
				if text, err = json.Marshal(asGo(m)); err == nil {
					return string(text), nil
				}
			}
		}
		return nil, fieldErr(path, err)
	}, true
}
