package connector_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// dbzEvent is a plain-JSON Debezium event for customer id (op c, u or d;
// "-" makes the tombstone that follows a delete).
func dbzEvent(topic, op string, id int, email string, sec int) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, `{"id":%d}`, id), Timestamp: time.Now().Add(time.Duration(sec-60) * time.Second)} // recent: kfake expires tombstones by record time
	switch op {
	case "-":
	case "d":
		r.Value = fmt.Appendf(nil, `{"before":{"id":%d,"email":%q},"after":null,"source":{"ts_ms":1796000000000},"op":"d","ts_ms":1796000000100}`, id, email)
	default:
		r.Value = fmt.Appendf(nil, `{"before":null,"after":{"id":%d,"email":%q},"source":{"ts_ms":1796000000000},"op":%q,"ts_ms":1796000000100}`, id, email, op)
	}
	return r
}

// TestDebeziumCompactedDelete: Debezium topics are compacted (the
// tombstone after a delete exists so that compaction can drop the key's
// earlier events, the delete event included). A sink that applied a
// key's insert, then was stopped while the source deleted the row, finds
// only the tombstone when it comes back: log compaction removed the
// delete event (superseded by the tombstone of the same key). The table
// must not keep the deleted row: a consumer of a compacted changelog
// reads a tombstone as the key's delete. The sink skipped the tombstone,
// and the audit (which classifies records as the sink does) called the
// table complete. From the review of the upsert path.
func TestDebeziumCompactedDelete(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.cmp"
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	tbl, dlq := e.debeziumTable("lake.customers_cmp", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	// Each Produce is one batch; kfake never compacts the last batch.
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0)}) // 0
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 2, "two@x", 1)}) // 1
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{dbzEvent(topic, "d", 1, "one@x", 2)}) // 2
	e.Produce([]*kgo.Record{dbzEvent(topic, "-", 1, "", 3)})      // 3
	e.Produce([]*kgo.Record{dbzEvent(topic, "u", 2, "two@y", 4)}) // 4
	e.Stack.Cluster.Compact()                                     // removes d@2 (superseded by the tombstone), keeps the tombstone @3
	// And (cleanup.policy=compact,delete) retention deletes the sunk
	// offsets 0 and 1, so that the audit's content level reads only the
	// log after them.
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows(t, tbl) {
		got[r.Columns["id"]] = r.Columns["email"]
	}
	t.Logf("table: %v", got)
	complete := auditSays(t, e, tbl)
	if _, ok := got["1"]; ok {
		t.Fatalf("audit complete=%v; customer 1 was deleted at the source (its delete compacted away, its tombstone read by the sink), but the table keeps its row: %v", complete, got)
	}
	if got["2"] != "two@y" || len(got) != 1 || !complete {
		t.Fatalf("table %v, audit complete %v; want only customer 2 = two@y, complete", got, complete)
	}
}

// TestAuditCompactedAfterSink: on a compacted topic, Kafka's log
// compaction removes a key's older records once a later one exists,
// including records the sink has already committed. docs/upsert.md says
// the content proof holds on a compacted topic ("compacted offsets are
// counted as compacted"). Here the table is exactly the fold of the log,
// compaction ran after the sink, and floe's deepest audit must call it
// complete; it reported count-mismatch for the range that held a@0 (its
// ledger counts 4 upserts, the log 3). From the review of the upsert path.
func TestAuditCompactedAfterSink(t *testing.T) {
	e := newEnv(t)
	const topic = "accounts-cmp"
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	tbl, dlq := e.upsertTable("lake.accounts_cmp")
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	now := int(time.Now().Unix() - 1_700_000_000)
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("a"), ptr("a1"), now), keyed(topic, 0, ptr("b"), ptr("b1"), now)}) // 0-1
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("a"), ptr("a2"), now)})                                            // 2
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("c"), ptr("c1"), now)})                                            // 3
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Stack.Cluster.Compact() // removes a@0, superseded by a@2, after the sink committed it
	got := latestRows(t, tbl)
	if len(got) != 3 || got["a"] != "a2" || got["b"] != "b1" || got["c"] != "c1" {
		t.Fatalf("table %v", got)
	}
	if !auditSays(t, e, tbl) {
		t.Fatal("the table is the fold of its compacted topic, but the audit reports findings")
	}
}

// TestDebeziumWrongValueFormatWarns: a Debezium table sunk with the wrong
// value format (--value registry, events in plain JSON) makes every event a
// dead letter, while the tombstones, whose keys decode, delete their keys.
// The sink still warns that its commits hold dead letters only
// (OnOnlyDeadLetters, the status page's warning), as it did when it skipped
// the tombstones.
func TestDebeziumWrongValueFormatWarns(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wrong"
	e.Topic(topic, 1, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	l := mapping.Layout{Value: mapping.ValueRegistry, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium}
	tbl, dlq := e.TableWithDeadLetters("lake.customers_wrong", snapshot.OpenOptions{Create: true, Layout: l, Mode: mapping.ModeUpsert, Key: &key})
	var recs []*kgo.Record
	for id := range 5 {
		recs = append(recs, dbzEvent(topic, "c", id, "x@y", id), dbzEvent(topic, "d", id, "x@y", id), dbzEvent(topic, "-", id, "", id))
	}
	e.Produce(recs)
	var warned atomic.Int64
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Registry: e.Registry(),
		OnOnlyDeadLetters: func(int64, string) { warned.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	if stats.DeadLetters != 10 || stats.Deletes != 5 || stats.Records != 0 || warned.Load() == 0 {
		t.Fatalf("%+v, warned %d times; want 10 dead letters, 5 deletes, no row, and the warning", stats, warned.Load())
	}
}

// dbzTruncate is a plain-JSON Debezium truncate event.
func dbzTruncate(topic string, sec int) *kgo.Record {
	return &kgo.Record{Topic: topic, Timestamp: time.Now().Add(time.Duration(sec-60) * time.Second),
		Value: []byte(`{"before":null,"after":null,"source":{"ts_ms":1796000000000},"op":"t","ts_ms":1796000000100}`)}
}

// TestWhereKeyAfterTruncate: a key upserted in commit 1, then the table
// truncated (--on-truncate delete-all) in commit 2, which writes no
// equality delete. floe where --key named commit 1, whose equality delete
// (of the key's older rows) holds the key, as its delete; it names the
// truncate's commit now. From the second review of the upsert path.
func TestWhereKeyAfterTruncate(t *testing.T) {
	e := newEnv(t)
	tbl, _ := truncatedTable(t, e, "trunc_where", false)
	if n := len(rows(t, tbl)); n != 0 {
		t.Fatalf("%d rows after the truncate", n)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	n := len(l.Commits)
	upsertCommit, truncCommit := l.Commits[n-2].SnapshotID, l.Commits[n-1].SnapshotID
	r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != lookup.KeyStatusDeleted || r.FoundBy != lookup.FoundByTruncate || r.SnapshotID == nil || *r.SnapshotID != truncCommit {
		got := int64(0)
		if r.SnapshotID != nil {
			got = *r.SnapshotID
		}
		t.Fatalf("status %s, snapshot %d (the key's upsert commit is %d, the truncate's %d): %s", r.Status, got, upsertCommit, truncCommit, r.Explanation)
	}
}

// TestWhereKeyDeletedBeforeTruncate: id 1 inserted (commit 1),
// deleted by a Debezium delete (commit 2), then the table truncated
// (commit 3, id 2's row removed). floe where --key {"id":1} must name
// commit 2, the delete, not the truncate: the key had no row when the
// truncate came (the first fix named the truncate: from the third review
// of the upsert path).
func TestWhereKeyDeletedBeforeTruncate(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.trunc_where2"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.trunc_where2", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0), dbzEvent(topic, "c", 2, "two@x", 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{dbzEvent(topic, "d", 1, "one@x", 2), dbzEvent(topic, "-", 1, "", 3)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{dbzTruncate(topic, 4)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	n := len(l.Commits)
	delCommit, truncCommit := l.Commits[n-2].SnapshotID, l.Commits[n-1].SnapshotID
	r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":1}`)
	if err != nil {
		t.Fatal(err)
	}
	got := int64(0)
	if r.SnapshotID != nil {
		got = *r.SnapshotID
	}
	if r.Status != lookup.KeyStatusDeleted || got != delCommit {
		t.Fatalf("status %s found_by %s, snapshot %d (the key's delete commit is %d, the truncate's %d): %s", r.Status, r.FoundBy, got, delCommit, truncCommit, r.Explanation)
	}
}

// TestDebeziumKeylessTombstoneAudits: a record without key and value on a
// Debezium topic is skipped by the sink (a tombstone without a key tells
// no row); the audit's content level must classify it the same way. It
// called it a dead letter (count-mismatch, NOT COMPLETE). Found by a
// new-user run.
func TestDebeziumKeylessTombstoneAudits(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.keyless"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.keyless", floetest.CDCPlainJSON)
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "a@x", 0), {Topic: topic, Timestamp: time.Now()}})
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Upserts != 1 || stats.Skipped != 1 || stats.DeadLetters != 0 {
		t.Fatalf("sink %+v; want 1 upsert and 1 skipped", stats)
	}
	if !auditSays(t, e, tbl) {
		t.Fatal("the audit disagrees with the sink about a keyless tombstone")
	}
}

// TestOnTruncateRemembered: a sink that ran with --on-truncate delete-all
// and is restarted without it (as a Debezium table keeps its envelope)
// made the next truncate a dead letter and kept every row. The table
// records the setting a sink was given (mapping.PropOnTruncate), and a
// sink given none takes the table's; one given another changes it. Found
// by a new-user run.
func TestOnTruncateRemembered(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.trunc_kept"
	tbl, cfg := e.truncatingTable(topic, "lake.trunc_kept")
	e.Produce([]*kgo.Record{dbzTruncate(topic, 2), dbzEvent(topic, "c", 3, "three@x", 3)})
	cfg.OnTruncate = ""
	st, err := e.sink(tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := latestIDs(t, tbl); !slices.Equal(got, []string{"3"}) || st.DeadLetters != 0 {
		t.Fatalf("rows %v, %d dead letters after a truncate sunk without --on-truncate; want only id 3", got, st.DeadLetters)
	}
	// Given otherwise, the sink changes the table's setting.
	cfg.OnTruncate = connector.TruncateDeadLetter
	e.Produce([]*kgo.Record{dbzTruncate(topic, 4)})
	if st, err = e.sink(tbl, cfg); err != nil || st.DeadLetters != 1 {
		t.Fatalf("sink with --on-truncate dead-letter: %+v, %v", st, err)
	}
	cfg.OnTruncate = ""
	e.Produce([]*kgo.Record{dbzTruncate(topic, 5)})
	if st, err = e.sink(tbl, cfg); err != nil || st.DeadLetters != 1 || !slices.Equal(latestIDs(t, tbl), []string{"3"}) {
		t.Fatalf("sink without --on-truncate after dead-letter: %+v, %v", st, err)
	}
}

// latestIDs is the sorted id column of tbl's rows.
func latestIDs(t *testing.T, tbl *snapshot.Table) []string {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows(t, tbl) {
		ids = append(ids, r.Columns["id"])
	}
	slices.Sort(ids)
	return ids
}

// TestOnTruncateRefusals: --on-truncate delete-all is refused before the
// sink starts on a table that is not Debezium's (it was ignored), and on
// a table of format version 3, whose truncate commit iceberg-go cannot
// make (it failed at every attempt, on the same record at every run).
func TestOnTruncateRefusals(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.trunc_v3"
	e.Topic(topic, 1, nil)
	plain, _ := e.upsertTable("lake.plain_trunc")
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	v3, _ := e.TableWithDeadLetters("lake.trunc_v3", snapshot.OpenOptions{Create: true, Layout: cdcLayout(t, floetest.CDCPlainJSON),
		Mode: mapping.ModeUpsert, Key: &key, Properties: map[string]string{"format-version": "3"}})
	for _, c := range []struct {
		tbl  *snapshot.Table
		want string
	}{
		{plain, "only for a table of Debezium change events"},
		{v3, "format version 3 cannot take a truncate"},
	} {
		_, err := connector.NewSink(e.Dial(), c.tbl, connector.Config{Topic: topic, OnTruncate: connector.TruncateDeleteAll})
		if _, ok := errors.AsType[*connector.ConfigError](err); !ok || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want a ConfigError saying %q", c.tbl.Name(), err, c.want)
		}
	}
}

// truncatingTable creates topic and the Debezium table name, and sinks two
// snapshot events (ids 1 and 2) into it with --on-truncate delete-all,
// returning the sink's config for more runs.
func (e *env) truncatingTable(topic, name string) (*snapshot.Table, connector.Config) {
	e.T.Helper()
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable(name, floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	e.Produce([]*kgo.Record{dbzEvent(topic, "r", 1, "one@x", 0), dbzEvent(topic, "r", 2, "two@x", 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		e.T.Fatal(err)
	}
	return tbl, cfg
}
