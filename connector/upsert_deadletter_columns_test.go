package connector_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestUpsertDeadLetterAddsNoColumn: in an upsert table keyed by a
// value column (--id-columns id), a record without the id is a dead letter
// (upsertChange). docs/typed-tables.md and decoder.decode promise "a dead
// letter never adds a column"; yet the decoder adopted that record's
// columns before upsertChange judged it, so the dead letter's type of v
// (string) makes the next, valid record ({"id":1,"v":5}) a schema-conflict
// dead letter, and the table gets a column v of the dead letter's type.
// Sunk without the keyless record, the same valid record is a row.
func TestUpsertDeadLetterAddsNoColumn(t *testing.T) {
	t.Run("id-columns", func(t *testing.T) {
		testUpsertDeadLetterAddsColumn(t, mapping.Layout{Value: mapping.ValueJSON},
			mapping.UpsertKey{Source: mapping.KeyFromValue, Columns: []string{"id"}}, false)
	})
	t.Run("key-string", func(t *testing.T) {
		testUpsertDeadLetterAddsColumn(t, mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyString},
			mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}, true)
	})
}

func testUpsertDeadLetterAddsColumn(t *testing.T, l mapping.Layout, key mapping.UpsertKey, nilKey bool) {
	e := newEnv(t)
	const topic = "people"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TableWithDeadLetters("lake.people", snapshot.OpenOptions{Create: true, Layout: l, Mode: mapping.ModeUpsert, Key: &key})
	recs := jsonRecords(topic, 0,
		`{"id":0}`,
		`{"v":"text, no id"}`, // a dead letter: no key
		`{"id":1,"v":5}`,      // valid
		`{"id":2}`,
	)
	if nilKey {
		recs[1].Key = nil
	}
	e.Produce(recs)
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tbl.Iceberg().Schema().Fields() {
		t.Logf("column %d %s %s", f.ID, f.Name, f.Type)
	}
	for _, d := range floetest.Rows(t, dlq) {
		t.Logf("dead letter at offset %d: %v", d.Offset, d.Columns[mapping.ColError])
	}
	if f, ok := tbl.Iceberg().Schema().FindFieldByName("v"); ok && f.Type.String() == "string" {
		t.Errorf("the table has column v of type %s, which only a dead letter held", f.Type)
	}
	if stats.DeadLetters != 1 || stats.Records != 3 {
		t.Errorf("rows %d, dead letters %d; want 3 rows and 1 dead letter (only the record without an id)", stats.Records, stats.DeadLetters)
	}
}

// TestUpsertDeadLetterConflictFail: TestUpsertDeadLetterAddsNoColumn
// with --on-schema-conflict fail: the valid record {"id":1,"v":5} stops
// the sink as a schema conflict, against a column type only a dead letter
// (a record without an id) gave the decoder.
func TestUpsertDeadLetterConflictFail(t *testing.T) {
	e := newEnv(t)
	const topic = "people"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TableWithDeadLetters("lake.people", snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Value: mapping.ValueJSON}, Mode: mapping.ModeUpsert,
		Key: &mapping.UpsertKey{Source: mapping.KeyFromValue, Columns: []string{"id"}}})
	e.Produce(jsonRecords(topic, 0, `{"id":0}`, `{"v":"text, no id"}`, `{"id":1,"v":5}`, `{"id":2}`))
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, OnSchemaConflict: connector.ConflictFail})
	if err != nil {
		t.Errorf("the sink stopped on a valid record: %v", err)
	}
}

// TestUpsertKeyWithNullFieldNamesNoKeyColumns: an upsert table keyed by
// its JSON key's fields. The first record's key has a null field
// ({"a":1,"b":null}). checkKeyFields means to refuse "a key without a value
// for one of its fields" and "a key that is a dead letter must not be the
// first key", but the JSON decoder leaves the null field out of the key's
// type, so the record is a row and its key names the key columns: [a]
// (floe.upsert-key=key:a). Every later record with the table's real key
// {"a":N,"b":M} is then a dead letter, for good (the commit names the key
// columns); without that one record they are all rows keyed by a,b.
func TestUpsertKeyWithNullFieldNamesNoKeyColumns(t *testing.T) {
	e := newEnv(t)
	const topic = "acc"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TableWithDeadLetters("lake.acc", keyFieldsOptions(t, mapping.KeyJSON))
	e.Produce([]*kgo.Record{
		keyedRec(topic, []byte(`{"a":1,"b":null}`), `{"n":0}`, 1),
		keyedRec(topic, []byte(`{"a":1,"b":1}`), `{"n":1}`, 2),
		keyedRec(topic, []byte(`{"a":1,"b":2}`), `{"n":2}`, 3),
		keyedRec(topic, []byte(`{"a":2,"b":1}`), `{"n":3}`, 4),
	})
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("key: %s", tbl.Iceberg().Properties()["floe.upsert-key"])
	for _, d := range floetest.Rows(t, dlq) {
		t.Logf("dead letter at offset %d: %v", d.Offset, d.Columns[mapping.ColError])
	}
	if stats.DeadLetters > 1 {
		t.Errorf("rows %d, dead letters %d; want the records of full keys a,b rows (at most the key with a null field a dead letter)", stats.Records, stats.DeadLetters)
	}
}

// TestUpsertAuditAdoptsNoDeadLetterColumn: the audit's content
// level decodes records with one decoder that, like the sink's, adopts the
// columns of a value before upsertChange makes it a dead letter (no id).
// The sink's decoder forgot that column when its session ended (the
// column was never committed); the audit's keeps it, so a later valid
// record whose field holds [] (no type: no column, a row) is a schema
// conflict to the audit, which reports the right table's row as a
// content mismatch (NOT COMPLETE).
func TestUpsertAuditAdoptsNoDeadLetterColumn(t *testing.T) {
	for _, a := range []string{`"text"`, `5`, `{"a":1}`, `[1]`, `[{"a":1}]`} {
		for _, b := range []string{`[]`, `{}`, `[[]]`, `[{}]`, `{"x":null}`, `{"x":[]}`} {
			t.Run(a+" then "+b, func(t *testing.T) { testUpsertAuditAdopts(t, a, b) })
		}
	}
}

func testUpsertAuditAdopts(t *testing.T, a, b string) {
	e := newEnv(t)
	const topic = "people"
	e.Topic(topic, 1, nil)
	l := mapping.Layout{Value: mapping.ValueJSON}
	tbl, dlq := e.TableWithDeadLetters("lake.people", snapshot.OpenOptions{Create: true, Layout: l, Mode: mapping.ModeUpsert,
		Key: &mapping.UpsertKey{Source: mapping.KeyFromValue, Columns: []string{"id"}}})
	cfg := connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}
	e.Produce(jsonRecords(topic, 0, `{"id":0}`, `{"m":`+a+`}`)) // a row, then a dead letter: no key
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce(jsonRecords(topic, 0, `{"id":1,"m":`+b+`}`)) // valid: a row, m has no type yet
	stats, err := e.sink(tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != 1 {
		t.Fatalf("second run: %d rows, %d dead letters; want the record a row", stats.Records, stats.DeadLetters)
	}
	for _, f := range tbl.Iceberg().Schema().Fields() {
		t.Logf("column %d %s %s", f.ID, f.Name, f.Type)
	}
	floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{{Topic: topic}: 3})
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("finding on a right table: %+v", f)
	}
	if !rep.Complete() {
		t.Errorf("the audit says NOT COMPLETE")
	}
}

// TestUpsertFirstKeyWithoutFields: an upsert table keyed by its
// JSON key's fields (--key json). The first record's key carries no typed
// field ({} or {"id":null}): a dead letter (no key). The records after it,
// with proper keys ({"id":N}), must be rows.
func TestUpsertFirstKeyWithoutFields(t *testing.T) {
	for _, first := range []string{`{}`, `{"id":null}`, `{"id":[]}`} {
		t.Run(first, func(t *testing.T) {
			e := newEnv(t)
			const topic = "acc"
			e.Topic(topic, 1, nil)
			opts := keyFieldsOptions(t, mapping.KeyJSON)
			tbl, dlq := e.TableWithDeadLetters("lake.acc", opts)
			e.Produce([]*kgo.Record{
				keyedRec(topic, []byte(first), `{"n":0}`, 1),
				keyedRec(topic, []byte(`{"id":1}`), `{"n":1}`, 2),
				keyedRec(topic, []byte(`{"id":2}`), `{"n":2}`, 3),
			})
			stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range floetest.Rows(t, dlq) {
				t.Logf("dead letter at offset %d: %v", d.Offset, d.Columns[mapping.ColError])
			}
			if stats.Records != 2 || stats.DeadLetters != 1 {
				t.Errorf("rows %d, dead letters %d; want 2 rows and 1 dead letter", stats.Records, stats.DeadLetters)
			}
		})
	}
}
