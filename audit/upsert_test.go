package audit_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Upsert tables (floe sink --mode upsert) hold one row per key. These tests
// sink real logs through kfake with floe's own upsert sink (repeated keys,
// keys in two partitions, tombstones, records without a key, committed and
// aborted transactions) and check that the audit proves the table equal to
// the fold of its log; then change the table as another writer could and
// check that the audit names what changed.

// upsertedTopic writes a mixed log of 2 partitions (floetest.MixedLog:
// keys k0..k12 in both partitions, a tombstone every tenth record, no key
// every seventh, a committed and an aborted transaction) and sinks it into
// a new upsert table keyed by the Kafka key, 25 records per flush.
func upsertedTopic(t *testing.T, e *env, topic string) *snapshot.Table {
	t.Helper()
	e.MixedLog(topic, floetest.MixedLog{Partitions: 2, Records: 90, Committed: 10, Aborted: 7, Trailing: 25})
	tbl, dlq := e.UpsertTable("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 25, DeadLetters: dlq})
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func TestUpsertAuditComplete(t *testing.T) {
	e := newEnv(t)
	tbl := upsertedTopic(t, e, "accounts")
	rep := auditEveryLevel(t, e, tbl)
	if rep.Mode != mapping.ModeUpsert || rep.UpsertKey != "kafka-key" {
		t.Fatalf("report mode %q key %q", rep.Mode, rep.UpsertKey)
	}
	var rows, records, deletes, dead int64
	for _, p := range rep.Partitions {
		rows += p.Rows
		records += p.Records
		dead += p.DeadLetters
		for _, r := range p.LedgerRanges {
			deletes += r.Deletes
		}
	}
	c := contentTotals(rep)
	// 13 keys: every row is the copy of its key's winning record; every
	// other upsert and every delete was folded away; two markers and 7
	// aborted records per partition.
	if rows == 0 || rows > 13 || c.Verified != rows || c.Verified+c.Folded != records+deletes ||
		c.Markers != 4 || c.Aborted != 14 || c.DeadLetters != dead || dead == 0 || c.Unverifiable != 0 {
		t.Fatalf("content %+v for %d rows of %d records, %d deletes, %d dead letters", c, rows, records, deletes, dead)
	}
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "upsert table (key kafka-key)") || !strings.Contains(text.String(), "verdict: COMPLETE") {
		t.Fatalf("text report:\n%s", text.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Mode      string  `json:"mode"`
		UpsertKey *string `json:"upsert_key"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || doc.Mode != "upsert" || doc.UpsertKey == nil || *doc.UpsertKey != "kafka-key" {
		t.Fatalf("JSON mode %q key %v (%v)", doc.Mode, doc.UpsertKey, err)
	}
}
