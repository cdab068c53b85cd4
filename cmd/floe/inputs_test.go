package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/localstack"
)

// TestSinkProtobufWithoutIndexes: Protobuf records framed as
// @kafkajs/confluent-schema-registry frames them (magic byte, schema ID,
// then the message, without Confluent's message-index array) are dead
// letters whose reason says what is wrong with the framing and the common
// cause; a record framed as Confluent's serializers frame it becomes a row.
func TestSinkProtobufWithoutIndexes(t *testing.T) {
	ctx := t.Context()
	st, err := localstack.Start(ctx, localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := localstack.CreateTopic(ctx, st.Brokers, "pb", 1, nil); err != nil {
		t.Fatal(err)
	}
	id, err := localstack.RegisterSchema(ctx, st.Registry, "pb-value", sr.Schema{Type: sr.TypeProtobuf,
		Schema: `syntax = "proto3"; package shop; message Order { int64 id = 1; string name = 2; }`})
	if err != nil {
		t.Fatal(err)
	}
	// Order{id: 7, name: "abc"}: field 1 varint 7, field 2 bytes "abc".
	msg := []byte{0x08, 0x07, 0x12, 0x03, 'a', 'b', 'c'}
	noIndexes := localstack.WireFormat(id, nil, msg) // what kafkajs writes: no array
	recs := []*kgo.Record{
		{Topic: "pb", Value: noIndexes},
		{Topic: "pb", Value: localstack.WireFormat(id, nil, nil)}, // an empty message, kafkajs-framed
		{Topic: "pb", Value: localstack.WireFormat(id, []int{0}, msg)},
	}
	if err := localstack.Produce(ctx, st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	code, out, errs := floe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "pb", "--table", "lake.pb", "--stop-at-end",
		"--value", "registry", "--schema-registry", st.Registry}, loc...)...)
	if code != 0 || !strings.Contains(out, "1 row and 2 dead letters") {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	for _, c := range []struct{ offset, want string }{
		{"0", "negative Protobuf message index -4"},
		{"1", "indexes are missing"},
	} {
		code, out, errs := floe(t, append([]string{"where", "--table", "lake.pb", "-t", "pb", "--partition", "0", "--offset", c.offset, "--json"}, loc...)...)
		var w struct{ Kind, Reason string }
		if code != 0 || json.Unmarshal([]byte(out), &w) != nil || w.Kind != "dead_letter" {
			t.Fatalf("where offset %s: exit %d\n%s\n%s", c.offset, code, out, errs)
		}
		for _, want := range []string{c.want, "message-index array between the schema ID and the message", "@kafkajs/confluent-schema-registry", "insert 0x00"} {
			if !strings.Contains(w.Reason, want) {
				t.Errorf("offset %s: reason %q lacks %q", c.offset, w.Reason, want)
			}
		}
	}
}
