package connector_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestDebeziumKeylessDeleteAfterKeyWidened: after ALTER ... TYPE bigint, a
// Debezium delete that comes without a record key (its key taken from the
// before image) has an int64 id; the key column is kept an int, and the
// before image's id (which fits) deletes its row, and is no dead letter
// (from a review).
func TestDebeziumKeylessDeleteAfterKeyWidened(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.t"
	tbl, dlq := e.intKeyedDebeziumTable(topic, 0, 1, 2)
	// A widened upsert (with its key) and a widened delete without one.
	del := connectEvent(topic, "int64", 1, "d", "a1", 11, false)
	del.Key = nil
	e.Produce([]*kgo.Record{connectEvent(topic, "int64", 0, "u", "b0", 10, false), del})
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"0": "b0", "2": "a2"}
	if got := namesByID(t, tbl); !maps.Equal(got, want) {
		t.Errorf("table %v, want %v", got, want)
	}
	if stats.DeadLetters != 0 {
		t.Errorf("dead letters %d (%q), want none: the delete's id 1 fits the int key column", stats.DeadLetters, stats.FirstDeadLetter)
	}
}

// TestFoldLatestRegistryKeyWidened: an upsert table keyed by the Kafka
// key within its partition (replay --fold latest: kafka_topic,
// kafka_partition, kafka_key) of a topic whose keys are Avro ints through
// the registry; the producer moves its key schema to long (an Avro
// promotion). The key column kafka_key should keep its type like every
// other upsert key column, or the long deletes do not reach the int rows
// (from a review).
func TestFoldLatestRegistryKeyWidened(t *testing.T) {
	e := newEnv(t)
	const topic = "fold-int-key"
	e.Topic(topic, 1, nil)
	vInt := register(t, e.Stack.Registry, topic+"-key", sr.Schema{Schema: `"int"`})
	vLong := register(t, e.Stack.Registry, topic+"-key", sr.Schema{Schema: `"long"`})
	key := func(id int64, schemaID int) []byte {
		b := []byte{0, byte(schemaID >> 24), byte(schemaID >> 16), byte(schemaID >> 8), byte(schemaID)}
		return avroLong(b, id)
	}
	l := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyRegistry}
	if err := l.Normalize(); err != nil {
		t.Fatal(err)
	}
	fk := mapping.FoldLatestKey()
	tbl, dlq := e.TableWithDeadLetters("lake.fold_int_key", snapshot.OpenOptions{Create: true, Layout: l, Mode: mapping.ModeUpsert, Key: &fk})
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, Registry: e.Registry()}
	e.Produce([]*kgo.Record{
		keyedRec(topic, key(1, vInt), `{"name":"one"}`, 0),
		keyedRec(topic, key(2, vInt), `{"name":"two"}`, 1),
	})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	tomb := keyedRec(topic, key(2, vLong), "", 3)
	tomb.Value = nil
	e.Produce([]*kgo.Record{keyedRec(topic, key(1, vLong), `{"name":"uno"}`, 2), tomb})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows(t, tbl) {
		got = append(got, r.Columns[mapping.ColKey]+"="+r.Columns["name"])
	}
	slices.Sort(got)
	f, _ := tbl.Iceberg().Schema().FindFieldByName(mapping.ColKey)
	if len(got) != 1 || !strings.HasSuffix(got[0], "=uno") {
		t.Errorf("rows %v (kafka_key %s), want only key 1 = uno", got, f.Type)
	}
}

// TestWidenedKeyStillCompactsDeadLetters: an upsert table whose key
// column an earlier floe widened is refused by compaction
// (KeyWidenedError); its dead-letter tables, which have no key, should
// still be compacted by floe maintain --compact / the scheduled
// compaction (CompactAll), not left to grow small files for good (from a
// review).
func TestWidenedKeyStillCompactsDeadLetters(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.t"
	tbl, dlq := e.widenedDebeziumTable(topic, 0)
	// Three sessions, each with a dead letter (a truncate event): three
	// small dead-letter files.
	for i := range 3 {
		trunc := connectEvent(topic, "int64", 0, "c", "x", 20+i, false)
		trunc.Value = []byte(strings.Replace(string(trunc.Value), `"op":"c"`, `"op":"t"`, 1))
		e.Produce([]*kgo.Record{trunc})
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
	}
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	before, _ := dlq.Files(e.Ctx, 0)
	res, err := tbl.CompactAll(e.Ctx, snapshot.CompactOptions{})
	if err := dlq.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := dlq.Files(e.Ctx, 0)
	if len(before) < 2 || len(after) >= len(before) {
		t.Errorf("dead-letter files %d before, %d after CompactAll (%d results, err %v); want the dead-letter table compacted", len(before), len(after), len(res), err)
	}
}
