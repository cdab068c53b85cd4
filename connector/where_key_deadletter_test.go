package connector_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestWhereKeyDecodedLaterDeadLetter (from a new user's CDC evaluation):
// on a Debezium table (keyed by the decoded key struct's id), customer 3's
// row is its update at offset 2, and its later change events became dead
// letters (one whose after image's id disagrees with its key, one whose
// email no longer fits the column), as did customer 5's: the table keeps
// the older rows. floe
// where --key '{"id":3}' answered "row ... offset 2" with no word of them,
// though it names a Kafka key's later dead letter. It names the latest,
// offset 4, with its reason, as for a Kafka key. A dead letter whose key
// is malformed is no key's: customer 1, whose row comes before it, is
// answered without a dead letter, and so is customer 2, whose only dead
// letter comes before its row.
func TestWhereKeyDecodedLaterDeadLetter(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_dlq"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.wk_dlq", floetest.CDCPlainJSON)
	event := func(key, value string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Timestamp: time.Now()}
	}
	after := func(image string) string {
		return `{"before":null,"after":` + image + `,"source":{"ts_ms":1796000000000},"op":"u","ts_ms":1796000000100}`
	}
	e.Produce([]*kgo.Record{
		dbzEvent(topic, "c", 1, "one@x", 0),                            // 0
		dbzEvent(topic, "c", 3, "three@x", 1),                          // 1
		dbzEvent(topic, "u", 3, "three@y", 2),                          // 2: customer 3's row
		event(`{"id":3}`, after(`{"id":4,"email":"four@x"}`)),          // 3: dead letter, after.id is not the key's
		event(`{"id":3}`, after(`{"id":3,"email":{"local":"three"}}`)), // 4: dead letter, email is no string
		event(`{"id":2`, after(`{"id":2,"email":"two@x"}`)),            // 5: dead letter, malformed key
		event(`{"id":2}`, after(`{"id":2,"email":{"local":"two"}}`)),   // 6: dead letter, before customer 2's row
		dbzEvent(topic, "c", 2, "two@x", 7),                            // 7: customer 2's row
		dbzEvent(topic, "c", 5, "five@x", 8),                           // 8: customer 5's row
		event(`{"id":5}`, after(`{"id":6,"email":"six@x"}`)),           // 9: dead letter, after.id is not the key's
	})
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	if stats.DeadLetters != 5 {
		t.Fatalf("%d dead letters (%s), want 5", stats.DeadLetters, stats.FirstDeadLetter)
	}
	// Without --brokers too: the dead-letter table holds the record keys.
	for _, broker := range []*connector.Broker{e.Broker(), nil} {
		r := whereKeyWith(t, e, tbl, broker, `{"id":3}`)
		if r.Status != "row" || deref64(r.Offset) != int64(2) || r.DeadLetterOffset == nil || *r.DeadLetterOffset != 4 ||
			!strings.Contains(r.DeadLetterReason, "email") ||
			!strings.Contains(r.Explanation, "but the key's latest record, at "+topic+"/0 offset 4, is a dead letter in lake.wk_dlq_dlq") {
			t.Errorf("customer 3 (brokers %v): %+v; want its row at offset 2 and its latest record, the dead letter at offset 4, named with its reason", broker != nil, r)
		}
		if r := whereKeyWith(t, e, tbl, broker, `{"id":5}`); r.DeadLetterOffset == nil || *r.DeadLetterOffset != 9 || !strings.Contains(r.DeadLetterReason, "key's field id is 5 and the value's field id is 6") {
			t.Errorf("customer 5 (brokers %v): %+v; want its latest record, the dead letter at offset 9, named with its reason", broker != nil, r)
		}
		for _, key := range []string{`{"id":1}`, `{"id":2}`} {
			r := whereKeyWith(t, e, tbl, broker, key)
			if r.Status != "row" || r.DeadLetterOffset != nil || strings.Contains(r.Explanation, "dead letter") {
				t.Errorf("key %s (brokers %v): %+v; want a row and no dead letter", key, broker != nil, r)
			}
		}
	}
}

// whereKeyWith is lookup.WhereKey on broker (nil: the table alone),
// failing the test on an error.
func whereKeyWith(t *testing.T, e *env, tbl *snapshot.Table, broker *connector.Broker, key string) lookup.KeyResult {
	t.Helper()
	r, err := lookup.WhereKey(e.Ctx, tbl, broker, key)
	if err != nil {
		t.Fatalf("where --key %s: %v", key, err)
	}
	t.Logf("where --key %s (brokers %v): status %s offset %v: %s", key, broker != nil, r.Status, deref64(r.Offset), r.Explanation)
	return r
}
