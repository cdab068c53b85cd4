package connector_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// TestDebeziumJSONWideIsADeadLetter (from a review): 36cd2f1 made a
// schemaless JSON record that widens the table past 512 KiB of schema a
// dead letter ("one record with 20,000 keys made every commit fail for
// good, past the 1 MiB manifest header"), but only in decodeValue's
// --value json case. A Debezium change event decoded from JSON
// (--envelope debezium --value json, without the converter's schema)
// infers its after image's columns as DecodeJSON does
// (DecodeDebeziumJSON) and widens the table just the same, with no limit:
// the same 20,000-key object in a row's after image still makes the table
// one no commit can land on.
func TestDebeziumJSONWideIsADeadLetter(t *testing.T) {
	l := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium}
	if err := l.Normalize(); err != nil {
		t.Fatal(err)
	}
	var obj strings.Builder
	obj.WriteString(`{"id":1,"scores":{`)
	for i := range 20000 {
		if i > 0 {
			obj.WriteString(",")
		}
		fmt.Fprintf(&obj, `"user%06d":%d`, i, i)
	}
	obj.WriteString("}}")
	wide := `{"op":"c","ts_ms":1,"after":` + obj.String() + `}`
	// The same object in a plain --value json table is a dead letter.
	plain := mapping.Layout{Value: mapping.ValueJSON}
	if err := plain.Normalize(); err != nil {
		t.Fatal(err)
	}
	prd, err := connector.NewRowDecoder(plain, nil, plain.Schema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, dead, err := prd.Decode(context.Background(), &kgo.Record{Value: []byte(obj.String())}); err != nil || dead == nil || !strings.Contains(dead.Error(), "columns wide") {
		t.Fatalf("plain --value json: dead %v, err %v; want the 512 KiB limit", dead, err)
	}
	rd, err := connector.NewRowDecoder(l, nil, l.Schema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, dead, err := rd.DecodeChange(context.Background(), &kgo.Record{Key: []byte(`{"id":1}`), Value: []byte(wide)}, mapping.UpsertKey{Source: mapping.KeyFromKeyFields})
	if err != nil {
		t.Fatal(err)
	}
	if dead == nil {
		t.Errorf("a Debezium JSON event whose after image has 20,000 keys is a row: the table widens past floe's 512 KiB schema limit (and the 1 MiB manifest header) with no dead letter")
	}
}

// TestDeepColumnOfExistingTableStillDecodes (from a review): a table
// sunk before 36cd2f1 from schemaless JSON records nesting lists 70 deep
// holds them as rows, and its schema the 70-deep column. The content
// audit (audit --verify-content) decodes each record again with
// connector.NewRowDecoder and the table's schema of today: it now judges
// those records dead letters ("nest more than 64 deep"), so every such
// row is reported as a content-mismatch (the row's digest against a dead
// letter's empty one) and the complete table fails its audit; replay
// likewise drops them. The column is already in the table: decoding into
// it widens nothing, and the limit's reason (a new nested column every
// flush pays for) does not apply.
func TestDeepColumnOfExistingTableStillDecodes(t *testing.T) {
	const depth = 70
	l := mapping.Layout{Value: mapping.ValueJSON}
	if err := l.Normalize(); err != nil {
		t.Fatal(err)
	}
	base := l.Schema()
	id := 1000
	var typ iceberg.Type = iceberg.PrimitiveTypes.Int64
	for range depth {
		id++
		typ = &iceberg.ListType{ElementID: id, Element: typ, ElementRequired: false}
	}
	fields := append(base.Fields(), iceberg.NestedField{ID: 999, Name: "id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 998, Name: "a", Type: typ})
	schema := iceberg.NewSchema(0, fields...)
	rd, err := connector.NewRowDecoder(l, nil, schema, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := `{"id":1,"a":` + strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) + "}"
	_, _, dead, err := rd.Decode(context.Background(), &kgo.Record{Value: []byte(rec)})
	if err != nil || dead != nil {
		t.Errorf("a record whose %d-deep column the existing table already has: dead %v, err %v; the content audit reports its row as a content-mismatch", depth, dead, err)
	}
}

// TestJSONKeyFieldsWideIsADeadLetter (from a review): the same hole as
// TestDebeziumJSONWideIsADeadLetter for an upsert table keyed by the
// fields of a schemaless JSON key: withKeyFields merges the key's fields
// into the value columns with CheckColumnNames only, so a key object with
// 20,000 members widens the table past the limit the value's members are
// held to.
func TestJSONKeyFieldsWideIsADeadLetter(t *testing.T) {
	l := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON}
	if err := l.Normalize(); err != nil {
		t.Fatal(err)
	}
	var key strings.Builder
	key.WriteString(`{`)
	for i := range 20000 {
		if i > 0 {
			key.WriteString(",")
		}
		fmt.Fprintf(&key, `"user%06d":%d`, i, i)
	}
	key.WriteString("}")
	rd, err := connector.NewRowDecoder(l, nil, l.Schema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, dead, err := rd.DecodeChange(context.Background(), &kgo.Record{Key: []byte(key.String()), Value: []byte(`{"v":1}`)}, mapping.UpsertKey{Source: mapping.KeyFromKeyFields})
	if err != nil {
		t.Fatal(err)
	}
	if dead == nil {
		t.Errorf("a record whose JSON key fields make 20,000 columns is a row: the table widens past floe's 512 KiB schema limit with no dead letter")
	}
}
