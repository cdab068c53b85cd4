package connector_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// connectEvent is a Debezium change event of a table (id <idType> PRIMARY
// KEY, name text) as Kafka Connect's JSON converter writes it with its
// schemas (schemas.enable=true); op "d" with name "" is a delete, and
// tombstone the record after it.
func connectEvent(topic, idType string, id int64, op, name string, ts int, tombstone bool) *kgo.Record {
	keySchema := map[string]any{"type": "struct", "name": "dbserver1.inventory.t.Key", "optional": false,
		"fields": []any{map[string]any{"field": "id", "type": idType, "optional": false}}}
	image := func(field string) map[string]any {
		return map[string]any{"field": field, "type": "struct", "name": "dbserver1.inventory.t.Value", "optional": true,
			"fields": []any{map[string]any{"field": "id", "type": idType, "optional": false},
				map[string]any{"field": "name", "type": "string", "optional": true}}}
	}
	envelope := map[string]any{"type": "struct", "name": "dbserver1.inventory.t.Envelope", "optional": false,
		"fields": []any{image("before"), image("after"),
			map[string]any{"field": "source", "type": "struct", "optional": false,
				"fields": []any{map[string]any{"field": "ts_ms", "type": "int64", "optional": false}}},
			map[string]any{"field": "op", "type": "string", "optional": false},
			map[string]any{"field": "ts_ms", "type": "int64", "optional": true}}}
	at := int64(1_700_000_000_000 + ts)
	payload := map[string]any{"source": map[string]any{"ts_ms": at}, "op": op, "ts_ms": at}
	if op == "d" {
		payload["before"] = map[string]any{"id": id, "name": name}
	} else {
		payload["after"] = map[string]any{"id": id, "name": name}
	}
	key, _ := json.Marshal(map[string]any{"schema": keySchema, "payload": map[string]any{"id": id}})
	value, _ := json.Marshal(map[string]any{"schema": envelope, "payload": payload})
	if tombstone {
		value = nil
	}
	return &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: time.UnixMilli(at)}
}

// namesByID is the table's rows as id -> name, failing on an id held twice.
func namesByID(t *testing.T, tbl *snapshot.Table) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, r := range rows(t, tbl) {
		id := r.Columns["id"]
		if _, dup := got[id]; dup {
			t.Errorf("id %s is held by two rows", id)
		}
		got[id] = r.Columns["name"]
	}
	return got
}

// TestDebeziumKeyWidenedKeepsItsType (from a review): the source table's
// primary key was altered from integer to bigint mid-stream, so
// Debezium's key and value schemas say int64 where they said int32.
// floe widened the key column to long, and iceberg-go's reads (floe's
// own, the audit's, compaction's) did not apply the long equality deletes
// to the rows written as int: an update left two rows of its key, a
// deleted key stayed, and compaction then made it the table for every
// reader. The key column now keeps its type: values that fit it are kept
// in it, and one that does not is a dead letter naming why.
func TestDebeziumKeyWidenedKeepsItsType(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.t"
	tbl, dlq := e.intKeyedDebeziumTable(topic, 0, 1, 2, 3)
	e.Produce([]*kgo.Record{
		connectEvent(topic, "int64", 0, "u", "b0", 10, false),
		connectEvent(topic, "int64", 1, "d", "a1", 11, false),
		connectEvent(topic, "int64", 1, "d", "a1", 11, true),
		connectEvent(topic, "int64", 5, "c", "a5", 12, false),
		connectEvent(topic, "int64", 3_000_000_000, "c", "too wide", 13, false),
	})
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"0": "b0", "2": "a2", "3": "a3", "5": "a5"}
	if got := namesByID(t, tbl); !maps.Equal(got, want) {
		t.Errorf("table %v, want %v", got, want)
	}
	if f, ok := tbl.Iceberg().Schema().FindFieldByName("id"); !ok || !f.Type.Equals(iceberg.PrimitiveTypes.Int32) {
		t.Errorf("key column id: %v; want it kept an int", f)
	}
	if stats.DeadLetters != 1 || !strings.Contains(stats.FirstDeadLetter, "keeps the types of its key columns") || !strings.Contains(stats.FirstDeadLetter, "3000000000") {
		t.Errorf("dead letters %d, first %q; want the id beyond int's range, naming why", stats.DeadLetters, stats.FirstDeadLetter)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Errorf("audit --deep --verify-content: %+v", rep.Findings)
	}
	res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := namesByID(t, tbl); !maps.Equal(got, want) || res.LiveRows != int64(len(want)) {
		t.Errorf("after compaction: table %v (%d live rows), want %v", got, res.LiveRows, want)
	}
}

// intKeyedDebeziumTable sinks creates of ids (int keys, names "a" and the
// id) from topic, a new topic, into a new Debezium table lake.t.
func (e *env) intKeyedDebeziumTable(topic string, ids ...int64) (tbl, dlq *snapshot.Table) {
	e.T.Helper()
	e.Topic(topic, 1, nil)
	tbl, dlq = e.debeziumTable("lake.t", floetest.CDCConnectJSON)
	var recs []*kgo.Record
	for _, id := range ids {
		recs = append(recs, connectEvent(topic, "int32", id, "c", fmt.Sprint("a", id), int(id), false))
	}
	e.Produce(recs)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		e.T.Fatal(err)
	}
	return tbl, dlq
}

// widenedDebeziumTable is intKeyedDebeziumTable with the key column id
// then widened to long, as a floe before key types were kept did.
func (e *env) widenedDebeziumTable(topic string, ids ...int64) (tbl, dlq *snapshot.Table) {
	t := e.T
	t.Helper()
	tbl, dlq = e.intKeyedDebeziumTable(topic, ids...)
	cur := tbl.Iceberg().Schema()
	fields := slices.Clone(cur.Fields())
	for i, f := range fields {
		if f.Name == "id" {
			fields[i].Type = iceberg.PrimitiveTypes.Int64
		}
	}
	if _, err := tbl.ReserveSchema(e.Ctx, tbl.Iceberg(), iceberg.NewSchemaWithIdentifiers(cur.ID, cur.IdentifierFieldIDs, fields...)); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	return tbl, dlq
}

// TestCompactRefusesWidenedKey: an upsert table whose key column an
// earlier floe (or another engine) widened from int to long is not
// compacted: iceberg-go's scan leaves the rows written as int undeleted,
// and a rewrite through it would make them the table for every reader.
func TestCompactRefusesWidenedKey(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.t"
	tbl, dlq := e.widenedDebeziumTable(topic, 0, 1)
	e.Produce([]*kgo.Record{connectEvent(topic, "int64", 0, "u", "b0", 10, false)})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	_, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{})
	var widened *snapshot.KeyWidenedError
	if !errors.As(err, &widened) || widened.Column != "id" || !strings.Contains(err.Error(), "replay") {
		t.Fatalf("compaction of a table whose key column was widened: %v; want a KeyWidenedError naming id and replay", err)
	}
	if dels, err := tbl.DeleteFiles(e.Ctx, tbl.Head().SnapshotID); err != nil || len(dels) == 0 {
		t.Errorf("delete files after the refused compaction: %d, %v; want them kept", len(dels), err)
	}
}

// sinkEach sinks each batch into tbl in a session of its own (a commit
// each), dead letters into dlq.
func (e *env) sinkEach(tbl, dlq *snapshot.Table, batches ...[]*kgo.Record) {
	e.T.Helper()
	for _, batch := range batches {
		e.Produce(batch)
		if _, err := e.sink(tbl, connector.Config{Topic: batch[0].Topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
			e.T.Fatal(err)
		}
	}
}

// loseHeadDeleteFile deletes from the storage the delete file the head of
// the upsert table tbl added, and returns its path.
func (e *env) loseHeadDeleteFile(tbl *snapshot.Table) string {
	e.T.Helper()
	dels, err := tbl.DeleteFiles(e.Ctx, 0)
	if err != nil {
		e.T.Fatal(err)
	}
	i := slices.IndexFunc(dels, func(d snapshot.DeleteFile) bool { return d.AddedBy == tbl.Head().SnapshotID })
	if i < 0 {
		e.T.Fatalf("no delete file of the head in %+v", dels)
	}
	if err := os.Remove(strings.TrimPrefix(dels[i].Path, "file://")); err != nil {
		e.T.Fatal(err)
	}
	return dels[i].Path
}

// TestUpsertDeleteFileGone (from a new-user run): an equality delete file
// of an upsert table deleted from the storage behind floe's back was
// reported by floe audit --deep as its data file gone ("its rows are
// lost"), though the data file was there, and a scan named the data file
// too. The audit now names the delete file, and a scan fails naming it.
func TestUpsertDeleteFileGone(t *testing.T) {
	e := newEnv(t)
	const topic = "accounts"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable("lake.accounts")
	k, v1, v2 := "k1", "one", "uno"
	e.sinkEach(tbl, dlq, []*kgo.Record{keyed(topic, 0, &k, &v1, 0)}, []*kgo.Record{keyed(topic, 0, &k, &v2, 1)})
	// The update's deletes, which apply to the first commit's row.
	gone := e.loseHeadDeleteFile(tbl)
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	named := slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool { return f.Kind == audit.KindMissingFile && f.File == gone })
	blamed := slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool {
		return f.Kind == audit.KindMissingFile && f.File != gone && strings.Contains(f.Detail, "its rows are lost")
	})
	if rep.Complete() || !named || blamed {
		t.Errorf("audit: findings %+v; want a missing-file naming delete file %s and no data file blamed", rep.Findings, gone)
	}
	err = tbl.ScanFiles(e.Ctx, 0, snapshot.ScanOptions{}, func(snapshot.FileBatch) error { return nil })
	var goneErr *snapshot.DataFileGoneError
	if !errors.As(err, &goneErr) || goneErr.Path != gone || !goneErr.Delete || goneErr.DeletesOf == "" {
		t.Errorf("scan: %v; want a DataFileGoneError naming delete file %s", err, gone)
	}
}

// TestUpsertAuditCountsRowsRetentionDeleted (from a new-user run): rows of
// an upsert table whose records retention deleted after they were sunk
// cannot be compared with the log, and docs/upsert.md counts them as
// unverifiable; the content level counted none, so its counts did not add
// up to the table's rows.
func TestUpsertAuditCountsRowsRetentionDeleted(t *testing.T) {
	e := newEnv(t)
	const topic = "accounts"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable("lake.accounts")
	var recs []*kgo.Record
	for i, k := range []string{"a", "b", "c", "d"} {
		v := "v" + k
		recs = append(recs, keyed(topic, 0, &k, &v, i))
	}
	e.Produce(recs)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 3); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	var c *audit.ContentStats
	for _, p := range rep.Partitions {
		if p.Topic == topic && p.Partition == 0 {
			c = p.Content
		}
	}
	if c == nil || c.Verified != 1 || c.Unverifiable != 3 {
		t.Errorf("content %+v; want 1 row verified and the 3 whose records retention deleted unverifiable", c)
	}
}

// TestUpsertDeleteFileGoneFullAudit (from a review): one equality delete
// file, applying to two older data files, deleted from the storage: the
// rows level names it once (it named it once per data file), and the full
// audit (--deep --verify-content) reports it where it failed as a whole.
func TestUpsertDeleteFileGoneFullAudit(t *testing.T) {
	e := newEnv(t)
	const topic = "acc2"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable("lake.acc2")
	k1, k2, a, b, a2, b2 := "k1", "k2", "a", "b", "a2", "b2"
	e.sinkEach(tbl, dlq,
		[]*kgo.Record{keyed(topic, 0, &k1, &a, 0)},
		[]*kgo.Record{keyed(topic, 0, &k2, &b, 1)},
		[]*kgo.Record{keyed(topic, 0, &k1, &a2, 2), keyed(topic, 0, &k2, &b2, 3)})
	gone := e.loseHeadDeleteFile(tbl)
	for _, opts := range []audit.Options{{Depth: audit.DepthRows}, {Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}} {
		rep, err := audit.Run(e.Ctx, tbl, opts)
		if err != nil {
			t.Fatalf("audit (content %v): %v; want a report", opts.VerifyContent, err)
		}
		n := 0
		for _, f := range rep.Findings {
			if f.Kind == audit.KindMissingFile && f.File == gone {
				n++
			}
		}
		if n != 1 || rep.Complete() {
			t.Errorf("audit (content %v): %d missing-file findings name delete file %s; want 1", opts.VerifyContent, n, gone)
		}
	}
}
