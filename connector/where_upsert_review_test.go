package connector_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestWhereSupersededBesideAddedDeadLetter: an upsert table keyed by the
// Kafka key; one range holds a superseded value (offset 0, key k0, whose
// row is offset 3's) and a dead letter (offset 1) that the dead-letter
// table holds: nothing is pending. floe where --brokers at offset 0 read
// the log and answered superseded; since fe1fdc0 any superseded answer in
// a range with dead letters loses its kind, pending or not.
func TestWhereSupersededBesideAddedDeadLetter(t *testing.T) {
	e := newEnv(t)
	const topic, table = "supdlq", "lake.supdlq"
	e.Topic(topic, 1, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	tbl, dlq := e.TableWithDeadLetters(table, snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString, Value: mapping.ValueJSON},
		Mode: mapping.ModeUpsert, Key: &key})
	e.Produce(jsonRecords(topic, 0, `{"id":1}`, `oops`, `{"id":2}`)) // offsets 0-2, keys k0 k1 k2
	e.Produce(jsonRecords(topic, 0, `{"id":3}`))                     // offset 3, key k0
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	if r, err := lookup.Where(e.Ctx, tbl, e.Broker(), tp, 1); err != nil || r.Kind != lookup.KindDeadLetter {
		t.Fatalf("offset 1: %v %s/%s: %s (want the dead letter found: nothing pending)", err, r.Status, r.Kind, r.Explanation)
	}
	r, err := lookup.Where(e.Ctx, tbl, e.Broker(), tp, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != lookup.KindSuperseded {
		t.Fatalf("where --brokers offset 0 (superseded by offset 3; the range's one dead letter is in the dead-letter table): kind %q, want %q: %s", r.Kind, lookup.KindSuperseded, r.Explanation)
	}
}

// TestUpsertNullKeyMemberAfterKeyNamed: a table keyed by its JSON key's
// fields whose key columns are named (id, by its first key {"id":1}). A
// later key {"id":2,"tenant":null} carries the key column id and a member
// without a value: JSON's null reads as an absent field everywhere else
// (conformJSON), and before 6c1728e the record was id 2's row. untypedMember
// now makes every such record a dead letter on a table running for a
// while, where no first key is at stake (a producer whose key has an
// optional member, null most of the time).
func TestUpsertNullKeyMemberAfterKeyNamed(t *testing.T) {
	e := newEnv(t)
	const topic = "nullmember"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TableWithDeadLetters("lake.nullmember", keyFieldsOptions(t, mapping.KeyJSON))
	e.Produce([]*kgo.Record{keyedRec(topic, []byte(`{"id":1}`), `{"n":0}`, 1)})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	t.Logf("key: %s", tbl.Iceberg().Properties()["floe.upsert-key"])
	e.Produce([]*kgo.Record{
		keyedRec(topic, []byte(`{"id":2,"tenant":null}`), `{"n":1}`, 2),
		keyedRec(topic, []byte(`{"id":3,"tenant":null}`), `{"n":2}`, 3),
	})
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	if stats.DeadLetters != 0 {
		for _, d := range floetest.Rows(t, dlq) {
			t.Logf("dead letter at offset %d: %v", d.Offset, d.Columns[mapping.ColError])
		}
		t.Fatalf("rows %d, dead letters %d; want keys id 2 and 3 rows (the key column id has its value; tenant is null)", stats.Records, stats.DeadLetters)
	}
}
