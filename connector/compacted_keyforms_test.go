package connector_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
)

// wrappedKey is id's record key as the JsonConverter writes it with
// schemas (key.converter.schemas.enable=true), the key column of Connect
// type typ (int32 before an ALTER COLUMN id TYPE bigint, int64 after).
func wrappedKey(typ string, id int) []byte {
	return fmt.Appendf(nil, `{"schema":{"type":"struct","fields":[{"type":%q,"optional":false,"field":"id"}],"optional":false,"name":"dbserver1.inventory.cmpk.Key"},"payload":{"id":%d}}`, typ, id)
}

// TestCompactedKeyForms (from a review): Kafka compacts by the key's bytes,
// and a key of fields has several byte forms once its schema changes
// (Debezium after ALTER COLUMN id TYPE bigint). Customer 1 is inserted in
// the old form and deleted in the new; compaction keeps the old form's
// insert and, past delete.retention.ms, drops the tombstone. The table
// that read the whole log is right, and its audit against the compacted log
// reports customer 1 as missing, a limit docs/upsert.md states; the finding
// names the key as floe where --key takes it, not by the record key's
// bytes (it gave the whole Connect schema).
func TestCompactedKeyForms(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.cmpk"
	compact, zero := "compact", "0"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact, "delete.retention.ms": &zero})
	ev := func(keyType, op string, id, sec int) *kgo.Record {
		r := dbzEvent(topic, op, id, fmt.Sprintf("c%d@x", id), sec)
		r.Key = wrappedKey(keyType, id)
		return r
	}
	e.Produce([]*kgo.Record{ev("int32", "c", 1, 0)})
	e.Produce([]*kgo.Record{ev("int32", "c", 2, 1)})
	e.Produce([]*kgo.Record{ev("int64", "d", 1, 2)})
	e.Produce([]*kgo.Record{ev("int64", "-", 1, 3)})
	e.Produce([]*kgo.Record{ev("int64", "c", 3, 4)}) // kfake never compacts the last batch
	tbl, dlq := e.debeziumTable("lake.cmpk", floetest.CDCConnectJSON)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	e.Stack.Cluster.Compact()
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Kind != audit.KindMissingRow || !strings.Contains(rep.Findings[0].Detail, `key "{\"id\":1}"`) {
		t.Fatalf("audit findings %+v: want one missing-row naming key {\"id\":1}", rep.Findings)
	}
	// The text report gives the key as it is pasted into floe where
	// --key, not escaped as the JSON report's string (from a new-user
	// report); the JSON report is as it was.
	var text, doc strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), `'{"id":1}'`) || strings.Contains(text.String(), `\"`) {
		t.Errorf("the text report does not name key '{\"id\":1}' as where --key takes it:\n%s", text.String())
	}
	if !strings.Contains(doc.String(), `key \"{\\\"id\\\":1}\"`) {
		t.Errorf("the JSON report's detail changed:\n%s", doc.String())
	}
}
