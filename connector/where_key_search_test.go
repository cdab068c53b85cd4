package connector_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestWhereKeySearchLogLostRecords (from a review): a Debezium topic is
// compacted (cleanup.policy=compact, as Debezium creates them); once
// delete.retention.ms passed, log compaction removes a deleted key's
// events and its tombstone altogether (or retention removes them). After
// floe maintain --compact dropped the table's equality deletes, floe where
// --key --brokers on the deleted key finds none of its records, and the
// log no longer holds offsets the ledger's ranges counted: the answer is
// unknown, naming them. It was never_seen, though the key had rows.
func TestWhereKeySearchLogLostRecords(t *testing.T) {
	for _, how := range []string{"log-compaction", "retention"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t)
			topic := "dbserver1.inventory.wk_" + strings.ReplaceAll(how, "-", "_")
			compact, zero := "compact", "0"
			e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact, "delete.retention.ms": &zero})
			tbl, dlq := e.debeziumTable("lake.wk_"+strings.ReplaceAll(how, "-", "_"), floetest.CDCPlainJSON)
			cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
			e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0)}) // 0
			e.Produce([]*kgo.Record{dbzEvent(topic, "c", 2, "two@x", 1)}) // 1
			if _, err := e.sink(tbl, cfg); err != nil {
				t.Fatal(err)
			}
			e.Produce([]*kgo.Record{dbzEvent(topic, "d", 1, "one@x", 2)}) // 2
			e.Produce([]*kgo.Record{dbzEvent(topic, "-", 1, "", 3)})      // 3
			e.Produce([]*kgo.Record{dbzEvent(topic, "u", 2, "two@y", 4)}) // 4
			e.Produce([]*kgo.Record{dbzEvent(topic, "u", 2, "two@z", 5)}) // 5
			if _, err := e.sink(tbl, cfg); err != nil {
				t.Fatal(err)
			}
			if got := rows(t, tbl); len(got) != 1 || got[0].Columns["id"] != "2" {
				t.Fatalf("table %+v: want customer 2 only", got)
			}
			r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":1}`)
			if err != nil || r.Status != lookup.KeyStatusDeleted {
				t.Fatalf("before the compactions: %+v, %v", r, err)
			}
			res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{})
			if err != nil || res.DroppedDeletes == 0 {
				t.Fatalf("table compaction: %+v, %v", res, err)
			}
			if how == "retention" {
				if err := e.Stack.Cluster.DeleteRecords(topic, 0, 4); err != nil {
					t.Fatal(err)
				}
			} else {
				e.Stack.Cluster.Compact() // removes c1@0, d1@2 and (expired) the tombstone @3, u2@4
			}
			r, err = lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":1}`)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("where --key {\"id\":1}: status %s found_by %q: %s", r.Status, r.FoundBy, r.Explanation)
			if r.Status == lookup.KeyStatusNeverSeen {
				t.Fatalf("customer 1 was created and deleted (the ledger's ranges count its records), but the log no longer holds them: where --key answers %s; want unknown (or deleted)", r.Status)
			}
		})
	}
}

// searchWhere is lookup.WhereKey, failing the test on an error.
func searchWhere(t *testing.T, e *env, tbl *snapshot.Table, key string, opts ...lookup.KeyOption) lookup.KeyResult {
	t.Helper()
	r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), key, opts...)
	if err != nil {
		t.Fatalf("where --key %s: %v", key, err)
	}
	t.Logf("where --key %s: status %s found_by %q partition %v offset %v: %s", key, r.Status, r.FoundBy, deref32(r.Partition), deref64(r.Offset), r.Explanation)
	return r
}

func deref32(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

func deref64(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestWhereKeySearchMultiPartitionWinner (from a review): customer 1's
// create in partition 0 (later offset, earlier timestamp) and its delete in
// partition 1 (later timestamp) in one commit: the delete wins (the later
// timestamp), before and after the table's compaction.
func TestWhereKeySearchMultiPartitionWinner(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_mp"
	e.Topic(topic, 2, nil)
	tbl, dlq := e.debeziumTable("lake.wk_mp", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	at := func(r *kgo.Record, p int32) *kgo.Record { r.Partition = p; return r }
	e.Produce([]*kgo.Record{at(dbzEvent(topic, "c", 2, "two@x", 0), 0), at(dbzEvent(topic, "c", 1, "one@x", 5), 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	// p1 offset 1: delete of 1 at second 20; p0 offsets 1, 2: update of 2, create of 1 at second 10.
	e.Produce([]*kgo.Record{at(dbzEvent(topic, "d", 1, "one@x", 20), 1), at(dbzEvent(topic, "u", 2, "two@y", 9), 0), at(dbzEvent(topic, "c", 1, "one@z", 10), 0)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(t, tbl) {
		if r.Columns["id"] == "1" {
			t.Fatalf("customer 1 has a row: %+v", r)
		}
	}
	check := func(when, foundBy string) {
		r := searchWhere(t, e, tbl, `{"id":1}`)
		if r.Status != lookup.KeyStatusDeleted || r.FoundBy != foundBy || deref32(r.Partition) != any(int32(1)) || deref64(r.Offset) != any(int64(1)) {
			t.Errorf("%s: want deleted, found by %s, at partition 1 offset 1", when, foundBy)
		}
	}
	check("before the compaction", lookup.FoundByDeleteFiles)
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	check("after the compaction", lookup.FoundByLog)
}

// TestWhereKeySearchTransactions (from a review): customer 1 created, then
// deleted in a committed transaction whose marker falls in the next
// commit's range, then re-created in an aborted transaction. After the
// compaction the log search names the committed delete.
func TestWhereKeySearchTransactions(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_txn"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.wk_txn", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0), dbzEvent(topic, "c", 2, "two@x", 1)}) // 0-1
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Txn("wk-a", []*kgo.Record{dbzEvent(topic, "d", 1, "one@x", 2), dbzEvent(topic, "-", 1, "", 3)}, true) // 2-3, marker 4
	e.Txn("wk-b", []*kgo.Record{dbzEvent(topic, "c", 1, "one@aborted", 4)}, false)                          // 5, marker 6
	e.Produce([]*kgo.Record{dbzEvent(topic, "u", 2, "two@y", 5)})                                           // 7
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	r := searchWhere(t, e, tbl, `{"id":1}`)
	if r.Status != lookup.KeyStatusDeleted || deref64(r.Offset) != any(int64(3)) {
		t.Errorf("before the compaction: want deleted at offset 3 (the tombstone, the commit's last record of the key)")
	}
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	r = searchWhere(t, e, tbl, `{"id":1}`)
	if r.Status != lookup.KeyStatusDeleted || r.FoundBy != lookup.FoundByLog || deref64(r.Offset) != any(int64(3)) {
		t.Errorf("after the compaction: want deleted, found by the log, at offset 3")
	}
}

// TestWhereKeySearchTruncateSameCommit (from a review): with --on-truncate
// delete-all, customer 3 is created and the table truncated in the same
// commit: the key never had a row in any snapshot, and the truncate
// removed it.
func TestWhereKeySearchTruncateSameCommit(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_tr"
	tbl, cfg := e.truncatingTable(topic, "lake.wk_tr")
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 3, "three@x", 2), dbzTruncate(topic, 3), dbzEvent(topic, "c", 4, "four@x", 4)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	got := rows(t, tbl)
	if len(got) != 1 || got[0].Columns["id"] != "4" {
		t.Fatalf("table %+v: want 4 only", got)
	}
	for _, key := range []string{`{"id":3}`, `{"id":1}`} {
		r := searchWhere(t, e, tbl, key)
		if r.Status == lookup.KeyStatusNeverSeen || !strings.Contains(r.Explanation+r.Uncertain, "truncate") {
			t.Errorf("key %s: want an answer naming the truncate", key)
		}
	}
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`{"id":3}`, `{"id":1}`} {
		r := searchWhere(t, e, tbl, key)
		if r.Status == lookup.KeyStatusNeverSeen || !strings.Contains(r.Explanation+r.Uncertain, "truncate") {
			t.Errorf("after the compaction: key %s: want an answer naming the truncate", key)
		}
	}
}

// TestWhereKeySearchDeleteWithoutRecordKey (from a review): a Debezium
// delete without a record key names its key by its before image: the
// search finds it.
func TestWhereKeySearchDeleteWithoutRecordKey(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_nokey"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.wk_nokey", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0), dbzEvent(topic, "c", 2, "two@x", 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	d := dbzEvent(topic, "d", 1, "one@x", 2)
	d.Key = nil
	e.Produce([]*kgo.Record{d, dbzEvent(topic, "u", 2, "two@y", 3)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	r := searchWhere(t, e, tbl, `{"id":1}`)
	if r.Status != lookup.KeyStatusDeleted || deref64(r.Offset) != any(int64(2)) {
		t.Errorf("want deleted at offset 2")
	}
}

// TestWhereKeySearchEqDeleteCommitUpsertedKey (from a review): customer 1
// created (commit 1), updated (commit 2, whose equality delete removes the
// create's row), then the update's row deleted by another engine (an
// equality delete on kafka_partition, kafka_offset, as Spark's
// merge-on-read DELETE writes). The newest floe equality delete holding
// the key is commit 2's, whose record of the key upserted it: commit 2 did
// not delete the key. where --key answered deleted by commit 2; it answers
// unknown, naming commit 2's record, as the log search does.
func TestWhereKeySearchEqDeleteCommitUpsertedKey(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_lost"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.wk_lost", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0), dbzEvent(topic, "c", 2, "two@x", 1)}) // 0-1
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{dbzEvent(topic, "u", 1, "one@y", 2)}) // 2
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	upsertCommit := tbl.Head().SnapshotID
	floetest.ForeignEqualityDelete(t, tbl.Iceberg(), 0, 2)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(t, tbl) {
		if r.Columns["id"] == "1" {
			t.Fatalf("customer 1 still has a row: %+v", r)
		}
	}
	r := searchWhere(t, e, tbl, `{"id":1}`)
	if r.Status == lookup.KeyStatusDeleted && r.SnapshotID != nil && *r.SnapshotID == upsertCommit {
		t.Fatalf("status deleted by snapshot %d, the commit whose record (offset 2) gave the key its row: want unknown (the row is gone without a delete), as the log search answers", upsertCommit)
	}
}

// TestWhereKeySearchTruncateBeforeKeyBlamed (from a review): the table
// took a truncate (commit 2) before customer 3 was created (commit 2,
// after the truncate event). After a compaction, another engine deletes
// customer 3's row. The log search finds customer 3's create as its last
// record; the answer explained the missing row with "a truncate removed
// it", though the truncate came before the create in the log.
func TestWhereKeySearchTruncateBeforeKeyBlamed(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_trb"
	tbl, cfg := e.truncatingTable(topic, "lake.wk_trb")
	e.Produce([]*kgo.Record{dbzTruncate(topic, 2), dbzEvent(topic, "c", 3, "three@x", 3)}) // 2, 3
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	floetest.ForeignEqualityDelete(t, tbl.Iceberg(), 0, 3)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, tbl); len(got) != 0 {
		t.Fatalf("table %+v: want empty", got)
	}
	r := searchWhere(t, e, tbl, `{"id":3}`)
	if r.Status == lookup.KeyStatusDeleted || strings.Contains(r.Explanation, "a truncate removed it") {
		t.Fatalf("customer 3 was created after the truncate, and its row deleted by another engine: want unknown, not blaming the truncate")
	}
}

// TestWhereKeySearchWithoutRegistry (from a review): a registry (Avro)
// Debezium table; customer 2 deleted, its equality delete live (no
// compaction). where --key with --brokers but without --schema-registry
// knows the answer from the table alone (deleted, by the commit of the
// live equality delete), and needs the registry only to name the deleting
// record's offset; a key with no row and no delete is never_seen. Both
// lookups failed with the --schema-registry refusal; they answer, asking
// for the registry.
func TestWhereKeySearchWithoutRegistry(t *testing.T) {
	e := newEnv(t)
	tbl := avroDeletedTable(t, e, "wk_avro")
	searchWhere(t, e, tbl, `{"id":2}`, lookup.WithRegistry(e.Registry()))
	for _, key := range []string{`{"id":2}`, `{"id":99}`} {
		r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), key)
		t.Logf("without the registry: key %s: %s %s; %v", key, r.Status, r.Explanation, err)
		if err != nil {
			t.Errorf("key %s: the table answers it (a live equality delete, or no compaction and no delete), but the lookup fails: %v", key, err)
		}
	}
}

// TestWhereKeySearchRegistryDown (from a review): the schema registry
// cannot be reached during the log search (a registry URL nothing listens
// on). The error read "read TOPIC/0 [..) from the broker: decode ...": a
// registry failure named as a failure to read from the broker, whose CLI
// hints point at --brokers.
func TestWhereKeySearchRegistryDown(t *testing.T) {
	e := newEnv(t)
	tbl := avroDeletedTable(t, e, "wk_regdown")
	down, err := connector.NewRegistry(connector.RegistryConfig{URL: "http://127.0.0.1:39517"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, 20*time.Second)
	defer cancel()
	_, err = lookup.WhereKey(ctx, tbl, e.Broker(), `{"id":2}`, lookup.WithRegistry(down))
	t.Logf("registry down: %v", err)
	if err == nil || strings.Contains(err.Error(), "from the broker") {
		t.Fatalf("want an error naming the registry, not the broker: %v", err)
	}
}

// avroDeletedTable sinks Debezium events through the schema registry (Avro)
// into the new table lake.NAME: customers 1-3, then customer 2 deleted.
func avroDeletedTable(t *testing.T, e *env, name string) *snapshot.Table {
	t.Helper()
	topic := "dbserver1.inventory." + name
	e.Topic(topic, 1, nil)
	c := floetest.NewCustomers(topic, 1)
	c.Snapshot(3, rand.New(rand.NewPCG(1, 2)))
	c.Delete(2)
	e.Produce(c.Records(t, floetest.CDCAvro, e.Stack.Registry))
	tbl, dlq := e.debeziumTable("lake."+name, floetest.CDCAvro)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Registry: e.Registry()}); err != nil {
		t.Fatal(err)
	}
	return tbl
}
