package connector_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// upsertTable creates the upsert table name keyed by the Kafka key as
// text (--mode upsert --key string), with its dead-letter table.
func (e *env) upsertTable(name string) (tbl, dlq *snapshot.Table) {
	e.T.Helper()
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	return e.TableWithDeadLetters(name, snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString},
		Mode: mapping.ModeUpsert, Key: &key})
}

// keyed is a record of key k (nil: no key) and value v (nil: a
// tombstone) at second ts.
func keyed(topic string, p int32, k, v *string, ts int) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: p, Timestamp: time.Unix(int64(1_700_000_000+ts), 0)}
	if k != nil {
		r.Key = []byte(*k)
	}
	if v != nil {
		r.Value = []byte(*v)
	}
	return r
}

func ptr(s string) *string { return &s }

// latestRows reads an upsert table with iceberg-go's scan (equality
// deletes applied) as key -> value, failing on a key seen twice.
func latestRows(t *testing.T, tbl *snapshot.Table) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, r := range rows(t, tbl) {
		if _, dup := got[r.Key]; dup {
			t.Fatalf("key %q has two rows", r.Key)
		}
		got[r.Key] = r.Value
	}
	return got
}

// TestUpsertStringKey sinks keyed records with updates, tombstones and a
// record without a key through kfake into an upsert table keyed by the
// Kafka key, in several flushes, and reads it back with iceberg-go's scan,
// which applies the equality deletes: exactly the latest value of every
// key whose latest record is not a tombstone. The ledger counts the rows,
// deletes and dead letters of every offset.
func TestUpsertStringKey(t *testing.T) {
	e := newEnv(t)
	const topic = "accounts"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable("lake.accounts")
	if tbl.Mode() != mapping.ModeUpsert || tbl.Iceberg().Metadata().Version() != 2 {
		t.Fatalf("mode %s, format v%d", tbl.Mode(), tbl.Iceberg().Metadata().Version())
	}
	if ids := tbl.Iceberg().Schema().IdentifierFieldIDs; len(ids) != 1 {
		t.Fatalf("identifier fields %v", ids)
	}
	want := map[string]string{}
	var recs []*kgo.Record
	var deletes, dead int64
	for i := range 60 {
		k := fmt.Sprintf("k%d", i%7)
		switch {
		case i%11 == 10:
			recs = append(recs, keyed(topic, 0, nil, ptr("no key"), i))
			dead++
		case i%9 == 8:
			recs = append(recs, keyed(topic, 0, &k, nil, i))
			delete(want, k)
			deletes++
		default:
			v := fmt.Sprintf("v%d", i)
			recs = append(recs, keyed(topic, 0, &k, &v, i))
			want[k] = v
		}
	}
	e.Produce(recs)
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 13, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Commits < 4 {
		t.Fatalf("%d commits, want several flushes", stats.Commits)
	}
	got := latestRows(t, tbl)
	if !maps.Equal(got, want) {
		t.Fatalf("table %v\nwant  %v", got, want)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	c := mapping.Cover(l.Ranges(tp))
	if c.Next != 60 || c.Records+c.Deletes+c.DeadLetters != 60 || c.Deletes != deletes || c.DeadLetters != dead || len(c.Gaps)+len(c.Overlaps) > 0 {
		t.Fatalf("coverage %+v: want 60 offsets, %d deletes, %d dead letters", c, deletes, dead)
	}
	if n := len(rows(t, dlq)); int64(n) != dead {
		t.Fatalf("%d dead letters, want %d", n, dead)
	}
	keys := slices.Sorted(maps.Keys(got))
	t.Logf("%d keys left: %v", len(keys), keys)
}
