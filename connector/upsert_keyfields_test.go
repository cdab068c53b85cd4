package connector_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestUpsertFirstKeysDiffer: an upsert table keyed by the key's fields
// (--key json) names its key columns at its first commit. Until then any
// key fields were taken, so a first flush whose keys have different fields
// ({"id":1}, then {"id":2,"tenant":"x"}) built key columns id and tenant,
// and the record whose key lacks tenant had a null key column: the commit
// failed, and every run read the same flush again. The first key names the
// key columns now: a key with other fields is a dead letter, before the
// naming commit as after it. From the review of the upsert path.
func TestUpsertFirstKeysDiffer(t *testing.T) {
	e := newEnv(t)
	const topic = "people-keys"
	e.Topic(topic, 1, nil)
	opts := keyFieldsOptions(t, mapping.KeyJSON)
	tbl, dlq := e.TableWithDeadLetters("lake.people_keys", opts)
	rec := func(k, v string, ts int) *kgo.Record { return keyedRec(topic, []byte(k), v, ts) }
	e.Produce([]*kgo.Record{
		rec(`{"id":1}`, `{"name":"one"}`, 0),
		rec(`{"id":2,"tenant":"x"}`, `{"name":"two"}`, 1),
		rec(`{"id":3}`, `{"name":"three"}`, 2),
	})
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	stats, err := e.sink(tbl, cfg)
	if err != nil {
		t.Fatalf("the sink cannot commit its first flush: %v", err)
	}
	var got []string
	for _, r := range rows(t, tbl) {
		got = append(got, r.Columns["id"]+"="+r.Columns["name"])
	}
	slices.Sort(got)
	dead := rows(t, dlq)
	if !slices.Equal(got, []string{"1=one", "3=three"}) || len(dead) != 1 || dead[0].Offset != 1 ||
		!strings.Contains(dead[0].Columns[mapping.ColError], "the key has the fields id,tenant, and the table is keyed by id: an upsert table keeps the key columns its first key named") {
		t.Fatalf("rows %v, dead letters %+v (%+v); want ids 1 and 3, the key with tenant a dead letter", got, dead, stats)
	}
	if !auditSays(t, e, tbl) {
		t.Fatal("the audit reports findings")
	}
}

// TestUpsertKeyNamedWhileCommitting: a table keyed by the key's fields
// (--key json) names its key columns in the commit of its first rows; a
// record whose key has other fields is then a dead letter. The sink
// decided that from the table as last loaded: a record read while the
// first commit was in flight (held here, as a slow catalog does) became
// an upsert of the key's other fields, which a quicker commit would have
// made a dead letter, and the audit disagreed with the ledger. The first
// key the sink reads names the columns now. From the review of the
// upsert path.
func TestUpsertKeyNamedWhileCommitting(t *testing.T) {
	e := newEnv(t)
	const topic, name = "people-race", "lake.people_race"
	e.Topic(topic, 1, nil)
	opts := keyFieldsOptions(t, mapping.KeyJSON)
	fc := e.newFaultCatalog(name)
	tbl, err := snapshot.Open(e.Ctx, fc, fc.ident, opts)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := snapshot.OpenDeadLetters(e.Ctx, fc, snapshot.DeadLetterName(fc.ident), tbl.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(k, v string, ts int) *kgo.Record { return keyedRec(topic, []byte(k), v, ts) }
	// The partition's start, committed before the commits are held.
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	release := fc.holdCommits()
	defer release()
	var consumed atomic.Int64
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	done := make(chan error, 1)
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, FlushRecords: 1, FlushInterval: 100 * time.Millisecond, DeadLetters: dlq,
		Logger: quietLogger(), OnConsumed: func(n int, _ int64) { consumed.Add(int64(n)) }})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := s.Run(ctx); done <- err }()
	e.Produce([]*kgo.Record{rec(`{"id":1}`, `{"name":"one"}`, 0)})
	select {
	case <-fc.entered: // the first rows' commit, which names the key, is held
	case <-time.After(30 * time.Second):
		t.Fatal("no commit")
	}
	e.Produce([]*kgo.Record{rec(`{"id":2,"tenant":"x"}`, `{"name":"two"}`, 1)})
	waitFor(t, 30*time.Second, "the second record read", func() bool { return consumed.Load() >= 2 })
	release()
	waitLedger(t, e, name, map[mapping.TopicPartition]int64{{Topic: topic, Partition: 0}: 2}, 30*time.Second)
	cancel()
	if err := <-done; err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	reader := e.OpenTable(name, snapshot.OpenOptions{})
	var got []string
	for _, r := range rows(t, reader) {
		got = append(got, fmt.Sprintf("id=%s tenant=%s name=%s", r.Columns["id"], r.Columns["tenant"], r.Columns["name"]))
	}
	dead := len(rows(t, dlq))
	t.Logf("rows %v, dead letters %d", got, dead)
	complete := auditSays(t, e, reader)
	if dead != 1 || !complete {
		t.Fatalf("the record {\"id\":2,\"tenant\":\"x\"} is a dead letter once the key is named, but read while the naming commit was in flight it became a row: rows %v, %d dead letters, audit complete=%v", got, dead, complete)
	}
}

// avroKey is a registry key in Confluent's wire format: schema id, then
// the Avro record id (long) and, when withTenant, an optional tenant
// (union null|string; nil: null).
func avroKey(id int, withTenant bool, tenant *string, schemaID int) []byte {
	b := []byte{0, byte(schemaID >> 24), byte(schemaID >> 16), byte(schemaID >> 8), byte(schemaID)}
	b = avroLong(b, int64(id))
	if withTenant {
		if tenant == nil {
			b = avroLong(b, 0)
		} else {
			b = avroString(avroLong(b, 1), *tenant)
		}
	}
	return b
}

// TestKeyNamingRestart: a table keyed by its key's fields (--key
// registry), whose key schema has an optional field tenant besides id;
// producers write with the old schema ({id}) and the new one. The first
// key the sink reads is {id:1, tenant:null}: a dead letter (a key column
// without a value), and, as the first key, it names the key columns
// id,tenant for the process: every {id} key after it was a dead letter too.
// No row, so no commit names the key. A restarted sink read {id:3} first
// and named the key id: {id} keys were rows then, the same key (schema,
// fields) decided two ways, and the audit called the table complete. A
// key without a value for a field is a dead letter that names nothing now.
// From the second review of the upsert path.
func TestKeyNamingRestart(t *testing.T) {
	e := newEnv(t)
	const topic, name = "people-avro-key", "lake.people_avro_key"
	e.Topic(topic, 1, nil)
	v1 := register(t, e.Stack.Registry, topic+"-key", sr.Schema{Schema: `{"type":"record","name":"K","fields":[{"name":"id","type":"long"}]}`})
	v2 := register(t, e.Stack.Registry, topic+"-key", sr.Schema{Schema: `{"type":"record","name":"K","fields":[{"name":"id","type":"long"},{"name":"tenant","type":["null","string"],"default":null}]}`})
	opts := keyFieldsOptions(t, mapping.KeyRegistry)
	tbl, dlq := e.TableWithDeadLetters(name, opts)
	rec := func(k []byte, v string, ts int) *kgo.Record { return keyedRec(topic, k, v, ts) }
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, Registry: e.Registry()}
	e.Produce([]*kgo.Record{
		rec(avroKey(1, true, nil, v2), `{"name":"one"}`, 0),
		rec(avroKey(2, false, nil, v1), `{"name":"two"}`, 1),
	})
	st1, err := e.sink(tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run 1: %+v", st1)
	e.Produce([]*kgo.Record{rec(avroKey(3, false, nil, v1), `{"name":"three"}`, 2)})
	st2, err := e.sink(tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run 2: %+v", st2)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows(t, tbl) {
		got = append(got, r.Columns["id"]+"="+r.Columns["name"])
	}
	var dead []string
	for _, r := range rows(t, dlq) {
		dead = append(dead, fmt.Sprintf("@%d %s", r.Offset, r.Columns[mapping.ColError]))
	}
	t.Logf("key %v, rows %v, dead letters %v, schema %v", tbl.UpsertKey(), got, dead, tbl.Iceberg().Schema())
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true, Registry: e.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Logf("audit finding: %+v", f)
	}
	complete := rep.Complete()
	// {id:2} (offset 1) and {id:3} (offset 2) have the same key schema and
	// fields: one decision for both.
	two := !slices.ContainsFunc(dead, func(s string) bool { return strings.HasPrefix(s, "@1 ") })
	three := !slices.ContainsFunc(dead, func(s string) bool { return strings.HasPrefix(s, "@2 ") })
	if two != three || !complete {
		t.Fatalf("{id:2} a row: %v, {id:3} a row: %v (same key schema, same fields); audit complete %v", two, three, complete)
	}
}

// TestUpsertFloatKeyIsDeadLetter: a table keyed by the key's fields names
// its key columns from the first key it reads. A first key {"id":1.5} named
// a double key column, which an upsert table cannot have (equality deletes
// compare floating-point values exactly): the commit refused it and the
// sink stopped, at every run, on the same record. Such a key is a dead
// letter now, before it can name anything, and the next key names the
// columns (a floating-point key after them is a dead letter of its type).
func TestUpsertFloatKeyIsDeadLetter(t *testing.T) {
	e := newEnv(t)
	const topic = "people-float-key"
	e.Topic(topic, 1, nil)
	opts := keyFieldsOptions(t, mapping.KeyJSON)
	tbl, dlq := e.TableWithDeadLetters("lake.people_float_key", opts)
	rec := func(k, v string, ts int) *kgo.Record { return keyedRec(topic, []byte(k), v, ts) }
	e.Produce([]*kgo.Record{
		rec(`{"id":1.5}`, `{"name":"float"}`, 0),
		rec(`{"id":2}`, `{"name":"two"}`, 1),
		rec(`{"id":{"a":1}}`, `{"name":"nested"}`, 2),
		rec(`{"id":3}`, `{"name":"three"}`, 3),
		rec(`{"id":4.5}`, `{"name":"float after"}`, 4),
	})
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	stats, err := e.sink(tbl, cfg)
	if err != nil {
		t.Fatalf("the sink stops on a floating-point first key: %v", err)
	}
	var got []string
	for _, r := range rows(t, tbl) {
		got = append(got, r.Columns["id"]+"="+r.Columns["name"])
	}
	slices.Sort(got)
	dead := rows(t, dlq)
	slices.SortFunc(dead, func(a, b row) int { return int(a.Offset - b.Offset) })
	if !slices.Equal(got, []string{"2=two", "3=three"}) || len(dead) != 3 || dead[0].Offset != 0 || dead[1].Offset != 2 || dead[2].Offset != 4 ||
		!strings.Contains(dead[0].Columns[mapping.ColError], "floating-point") {
		t.Fatalf("rows %v, dead letters %+v (%+v); want ids 2 and 3, the keys 1.5, {a:1} and 4.5 dead letters", got, dead, stats)
	}
	if !auditSays(t, e, tbl) {
		t.Fatal("the audit reports findings")
	}
}

// keyFieldsOptions opens a new upsert table keyed by its key's fields,
// decoded with keyFormat, and a JSON value.
func keyFieldsOptions(t testing.TB, keyFormat mapping.KeyMode) snapshot.OpenOptions {
	t.Helper()
	l := mapping.Layout{Value: mapping.ValueJSON, Key: keyFormat}
	if err := l.Normalize(); err != nil {
		t.Fatal(err)
	}
	return snapshot.OpenOptions{Create: true, Layout: l, Mode: mapping.ModeUpsert, Key: &mapping.UpsertKey{Source: mapping.KeyFromKeyFields}}
}

// keyedRec is a record of topic with key k and value v, ts seconds into
// the tests' epoch.
func keyedRec(topic string, k []byte, v string, ts int) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: k, Value: []byte(v), Timestamp: time.Unix(int64(1_700_000_000+ts), 0)}
}
