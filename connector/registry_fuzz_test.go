package connector

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// FuzzRegistryResolve feeds arbitrary payloads to Resolve, with schemas 1
// (Avro) and 2 (Protobuf) in the cache and nothing listening at the
// registry's address. Schema IDs are folded onto 1 and 2 (by the lowest
// bit), so that most inputs reach the split of a known schema's payload,
// but those starting 0xffffff, which stay unknown and fail at the closed
// port. Resolve never
// panics and never allocates by a corrupt count; it returns a *WireError,
// a *RegistryUnavailableError (an ID not cached), or a value whose data is
// the payload's tail and whose Protobuf indexes, framed again, give the
// same split.
func FuzzRegistryResolve(f *testing.F) {
	var h sr.ConfluentHeader
	frame := func(id int, idx []int, data ...byte) []byte {
		b, _ := h.AppendEncode(nil, id, idx)
		return append(b, data...)
	}
	for _, seed := range [][]byte{
		nil, {0}, {1, 2, 3, 4, 5}, {0, 0, 0, 0},
		frame(1, nil, 2, 4), frame(2, []int{0}, 8, 7), frame(2, []int{3, 1, 4}, 8, 7), frame(2, nil),
		frame(2, nil, 0x7f), frame(2, nil, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01),
		frame(2, nil, 0xfe, 0xff, 0xff, 0xff, 0x0f), frame(2, nil, 0x02, 0x01), frame(0xffffff09, nil, 1),
	} {
		f.Add(seed)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r, err := NewRegistry(RegistryConfig{URL: "http://" + addr})
	if err != nil {
		f.Fatal(err)
	}
	r.schemas[1] = &Schema{ID: 1, Type: SchemaAvro, Text: `"long"`}
	r.schemas[2] = &Schema{ID: 2, Type: SchemaProtobuf, Text: `syntax = "proto3"; message M { int64 a = 1; }`}

	f.Fuzz(func(t *testing.T, payload []byte) {
		if len(payload) >= 5 && !bytes.HasPrefix(payload[1:], []byte{0xff, 0xff, 0xff}) {
			payload = slices.Clone(payload)
			copy(payload[1:5], []byte{0, 0, 0, 1 + payload[4]&1})
		}
		v, err := r.Resolve(t.Context(), payload)
		if err != nil {
			var we *WireError
			var ue *RegistryUnavailableError
			if !errors.As(err, &we) && !errors.As(err, &ue) {
				t.Fatalf("Resolve(%x): %T %v", payload, err, err)
			}
			return
		}
		if !bytes.HasSuffix(payload, v.Data) || len(payload) < 5+len(v.Data) {
			t.Fatalf("Resolve(%x): data %x is not the payload's tail after the header", payload, v.Data)
		}
		if v.Schema.Type != SchemaProtobuf {
			if v.Indexes != nil || len(v.Data) != len(payload)-5 {
				t.Fatalf("Resolve(%x): %s value with indexes %v, data %x", payload, v.Schema.Type, v.Indexes, v.Data)
			}
			return
		}
		if len(v.Indexes) == 0 {
			t.Fatalf("Resolve(%x): a Protobuf value without message indexes", payload)
		}
		again, err := r.Resolve(t.Context(), frame(v.Schema.ID, v.Indexes, v.Data...))
		if err != nil || !slices.Equal(again.Indexes, v.Indexes) || !bytes.Equal(again.Data, v.Data) {
			t.Fatalf("Resolve(%x) = %v %x; framed again: %v %x, %v", payload, v.Indexes, v.Data, again.Indexes, again.Data, err)
		}
	})
}
