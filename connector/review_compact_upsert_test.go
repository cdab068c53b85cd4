package connector_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewWhereKeyTruncatedThenCompacted: key id 1 upserted (commit 1),
// the table truncated (commit 2, --on-truncate delete-all), then other
// keys upserted (commits 3, 4) and the table compacted: the compaction
// drops every equality delete (no older data file survives), commit 1's
// included. floe where --key {"id":1} must still name the truncate
// (found_by truncate), as it does before the compaction; it answers
// never_seen ("no record ever had it, or compaction dropped the delete"),
// with --brokers too, though the ledger names the truncate and the log
// holds the key's insert.
func TestReviewWhereKeyTruncatedThenCompacted(t *testing.T) {
	for _, src := range []mapping.KeySource{mapping.KeyFromKeyFields} {
		t.Run(string(src), func(t *testing.T) {
			e := newEnv(t)
			topic := "dbserver1.inventory.trunc_compact_" + string(src)
			e.Topic(topic, 1, nil)
			key := mapping.UpsertKey{Source: src}
			layout := cdcLayout(t, floetest.CDCPlainJSON)
			tbl, dlq := e.TableWithDeadLetters("lake.trunc_compact_"+strings.ReplaceAll(string(src), "-", "_"), snapshot.OpenOptions{Create: true, Layout: layout, Mode: mapping.ModeUpsert, Key: &key})
			cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
			for _, batch := range [][]*kgo.Record{
				{dbzEvent(topic, "c", 1, "one@x", 0), dbzEvent(topic, "c", 2, "two@x", 1)},
				{dbzTruncate(topic, 2)},
				{dbzEvent(topic, "c", 3, "three@x", 3)},
				{dbzEvent(topic, "c", 4, "four@x", 4)},
			} {
				e.Produce(batch)
				if _, err := e.sink(tbl, cfg); err != nil {
					t.Fatal(err)
				}
			}
			if err := tbl.Refresh(e.Ctx); err != nil {
				t.Fatal(err)
			}
			l, err := tbl.Ledger()
			if err != nil {
				t.Fatal(err)
			}
			truncCommit := l.Commits[len(l.Commits)-3].SnapshotID
			key1 := `{"id":1}`
			check := func(when string) {
				t.Helper()
				r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), key1)
				if err != nil {
					t.Fatal(err)
				}
				got := int64(0)
				if r.SnapshotID != nil {
					got = *r.SnapshotID
				}
				if r.Status != lookup.KeyStatusDeleted || r.FoundBy != lookup.FoundByTruncate || got != truncCommit {
					t.Fatalf("%s: status %s found_by %q snapshot %d (the truncate is %d): %s", when, r.Status, r.FoundBy, got, truncCommit, r.Explanation)
				}
			}
			check("before the compaction")
			res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20})
			if err != nil || res.SnapshotID == 0 {
				t.Fatalf("compaction: %+v, %v", res, err)
			}
			t.Logf("compaction dropped %d delete files", res.DroppedDeletes)
			check("after the compaction")
		})
	}
}

// dbzState reads a Debezium customers table (id, email) with iceberg-go's
// scan, deletes applied, failing on a key held twice.
func dbzState(t *testing.T, tbl *snapshot.Table) map[int64]string {
	t.Helper()
	got := map[int64]string{}
	headBatches(t, tbl, func(b arrow.RecordBatch) {
		ids := b.Column(b.Schema().FieldIndices("id")[0]).(*array.Int64)
		emails := b.Column(b.Schema().FieldIndices("email")[0]).(*array.String)
		for i := range int(b.NumRows()) {
			if _, dup := got[ids.Value(i)]; dup {
				t.Fatalf("id %d has two rows", ids.Value(i))
			}
			got[ids.Value(i)] = emails.Value(i)
		}
	})
	return got
}

// TestReviewDebeziumPartitionedCompaction: a Debezium table keyed by the
// key struct's id and partitioned by a transform of it (bucket, truncate,
// identity: the spec's field waits for the key column, which the first
// commit adds), with inserts, updates, deletes with their tombstones and a
// truncate, compacted between sinks: the table is the fold of the log
// after every step, and the audit finds it complete at the rows level.
func TestReviewDebeziumPartitionedCompaction(t *testing.T) {
	for i, spec := range []string{"bucket(3, id)", "truncate(4, id)", "identity(id)"} {
		t.Run(spec, func(t *testing.T) {
			e := newEnv(t)
			topic := fmt.Sprintf("dbserver1.inventory.part%d", i)
			e.Topic(topic, 1, nil)
			key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
			p, err := mapping.ParsePartitionBy(spec)
			if err != nil {
				t.Fatal(err)
			}
			tbl, dlq := e.TableWithDeadLetters(fmt.Sprintf("lake.part%d", i), snapshot.OpenOptions{Create: true, Layout: cdcLayout(t, floetest.CDCPlainJSON),
				Mode: mapping.ModeUpsert, Key: &key, PartitionBy: &p})
			cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 4, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
			want := map[int64]string{}
			sec := 0
			ev := func(op string, id int, email string) *kgo.Record {
				sec++
				switch op {
				case "d":
					delete(want, int64(id))
				case "-":
				default:
					want[int64(id)] = email
				}
				return dbzEvent(topic, op, id, email, sec)
			}
			step := func(when string, recs ...*kgo.Record) {
				t.Helper()
				e.Produce(recs)
				if _, err := e.sink(tbl, cfg); err != nil {
					t.Fatal(err)
				}
				if got := dbzState(t, tbl); !maps.Equal(got, want) {
					t.Fatalf("%s: got %v, want %v", when, got, want)
				}
			}
			compact := func(when string) {
				t.Helper()
				if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
					t.Fatal(err)
				}
				if got := dbzState(t, tbl); !maps.Equal(got, want) {
					t.Fatalf("%s: got %v, want %v", when, got, want)
				}
			}
			var recs []*kgo.Record
			for id := 1; id <= 12; id++ {
				recs = append(recs, ev("c", id, fmt.Sprintf("%d@a", id)))
			}
			step("inserts", recs...)
			step("updates", ev("u", 3, "3@b"), ev("u", 7, "7@b"), ev("d", 5, "5@a"), ev("-", 5, ""), ev("u", 11, "11@b"))
			compact("first compaction")
			step("more", ev("u", 3, "3@c"), ev("d", 7, "7@b"), ev("-", 7, ""), ev("c", 5, "5@c"), ev("c", 13, "13@c"))
			compact("second compaction")
			recs = []*kgo.Record{dbzTruncate(topic, sec+1)}
			sec++
			clear(want)
			recs = append(recs, ev("c", 2, "2@d"), ev("c", 9, "9@d"))
			step("truncate", recs...)
			step("after", ev("u", 2, "2@e"), ev("d", 9, "9@d"), ev("-", 9, ""))
			compact("third compaction")
			step("last", ev("c", 4, "4@f"), ev("u", 2, "2@f"))
			compact("fourth compaction")
			rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker()})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Complete() {
				var text strings.Builder
				_ = rep.WriteText(&text)
				t.Fatalf("audit:\n%s", text.String())
			}
		})
	}
}

// TestReviewWhereOffsetDebeziumAfterCompaction: floe where at every offset
// (position lookup) of a Debezium table keyed by the key struct's id,
// before and after a compaction: each answer must come without error.
// Once the table has an equality-delete file, every lookup fails with
// iceberg-go's "equality field ID 11 (id) not found in <data file>":
// RowAt's scan projects kafka_offset only, and iceberg-go v0.7.0 cannot
// apply equality deletes on a column the projection leaves out (the
// audit and floe where --key read such tables whole for that reason).
func TestReviewWhereOffsetDebeziumAfterCompaction(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.where_off"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.where_off", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 3, DeadLetters: dlq}
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "1@a", 0), dbzEvent(topic, "c", 2, "2@a", 1), dbzEvent(topic, "c", 3, "3@a", 2)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{dbzEvent(topic, "u", 1, "1@b", 3), dbzEvent(topic, "c", 4, "4@b", 4), dbzEvent(topic, "d", 2, "2@a", 5), dbzEvent(topic, "-", 2, "", 6)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		if err := tbl.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < 7; off++ {
			res, err := lookup.Where(e.Ctx, tbl, nil, mapping.TopicPartition{Topic: topic, Partition: 0}, off)
			if err != nil {
				t.Fatalf("%s: where offset %d: %v", when, off, err)
			}
			if live := off >= 2 && off <= 4; (res.File != "") != live {
				t.Fatalf("%s: where offset %d: %s file %q: %s", when, off, res.Status, res.File, res.Explanation)
			}
		}
	}
	check("before the compaction")
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	check("after the compaction")
}

// TestReviewWhereOffsetKafkaKeyUpsert: floe where at every offset of an
// upsert table keyed by the Kafka key, with updates and a tombstone, before
// and after a compaction: each answer comes without error, a live row's
// offset names its file, a superseded or deleting record's none.
func TestReviewWhereOffsetKafkaKeyUpsert(t *testing.T) {
	e := newEnv(t)
	const topic = "where_kk"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable("lake.where_kk")
	rec := func(k, v string) *kgo.Record {
		r := &kgo.Record{Topic: topic, Key: []byte(k)}
		if v != "-" {
			r.Value = []byte(v)
		}
		return r
	}
	cfg := connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}
	e.Produce([]*kgo.Record{rec("a", "1"), rec("b", "1"), rec("c", "1")})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{rec("a", "2"), rec("b", "-")})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	live := map[int64]bool{2: true, 3: true}
	check := func(when string) {
		t.Helper()
		if err := tbl.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < 5; off++ {
			res, err := lookup.Where(e.Ctx, tbl, nil, mapping.TopicPartition{Topic: topic, Partition: 0}, off)
			if err != nil {
				t.Fatalf("%s: where offset %d: %v", when, off, err)
			}
			if (res.File != "") != live[off] {
				t.Fatalf("%s: where offset %d: %s file %q: %s", when, off, res.Status, res.File, res.Explanation)
			}
		}
	}
	check("before the compaction")
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	check("after the compaction")
}
