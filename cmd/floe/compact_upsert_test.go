package main

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// upsertFold reads an upsert table keyed by kafka_key (a string) with
// iceberg-go's scan, deletes applied: key -> value, failing on a key read
// twice.
func upsertFold(t *testing.T, tbl *snapshot.Table) map[string]string {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, it, err := tbl.Iceberg().Scan(table.WithSelectedFields(mapping.ColKey, mapping.ColValue)).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rec, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		keys := rec.Column(0).(*array.String)
		vals := rec.Column(1).(*array.Binary)
		for i := range int(rec.NumRows()) {
			if _, dup := got[keys.Value(i)]; dup {
				t.Fatalf("key %q read twice", keys.Value(i))
			}
			got[keys.Value(i)] = string(vals.Value(i))
		}
		rec.Release()
	}
	return got
}

// TestMaintainCompactUpsert: floe maintain --compact on an upsert table
// (sunk in small flushes, one equality-delete file each) rewrites it with
// the deletes applied: it says how many rows are live and how many delete
// files it dropped, the table then has no delete file and reads exactly
// as before, the fold of the topic (the latest value of each key, none for
// a key whose latest record is a tombstone), and its ledger is untouched.
func TestMaintainCompactUpsert(t *testing.T) {
	st, loc := sinkStack(t)
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "customers"},
		snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString}, Mode: mapping.ModeUpsert, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := snapshot.OpenDeadLetters(t.Context(), cat, snapshot.DeadLetterName(tbl.Identifier()), tbl.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := connector.Dial(t.Context(), st.Brokers, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := connector.NewSink(b, tbl, connector.Config{Topic: "orders", StopAtEnd: true, FlushRecords: 40, DeadLetters: dlq, Logger: floetest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, r := range localstack.DemoEvents("orders", 3, 300, time.Now(), 1) { // sinkStack's events
		if r.Value == nil {
			delete(want, string(r.Key))
		} else {
			want[string(r.Key)] = string(r.Value)
		}
	}
	if got := upsertFold(t, tbl); !maps.Equal(got, want) {
		t.Fatalf("before compaction: %d keys, the fold has %d", len(got), len(want))
	}
	commits := func() int {
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Commits)
	}
	before := commits()

	out := mustFloe(t, append([]string{"maintain", "--table", "lake.customers", "--compact"}, loc...)...)
	if !strings.Contains(out, "compaction of lake.customers: snapshot ") || !strings.Contains(out, "deletes applied: ") || !strings.Contains(out, " delete files dropped") {
		t.Fatalf("floe maintain --compact:\n%s", out)
	}
	if got := upsertFold(t, tbl); !maps.Equal(got, want) {
		t.Fatalf("after compaction: %d keys, the fold has %d", len(got), len(want))
	}
	head := tbl.Head()
	if !tbl.IsCompaction(head.SnapshotID) || head.Summary.Properties["total-delete-files"] != "0" || commits() != before {
		t.Fatalf("after compaction: head %d (compaction %v) summary %v, %d ledger commits (before %d)",
			head.SnapshotID, tbl.IsCompaction(head.SnapshotID), head.Summary.Properties, commits(), before)
	}
}
