package connector_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestWhereKeyTruncateExpired (from a review): id 1 upserted (commit A),
// the table truncated (commit T, --on-truncate delete-all), then id 3
// inserted (commit B). where --key {"id":1} names T; once floe maintain
// expired every snapshot but the head, floe can no longer read the table
// before T, and the answer says that a truncate may have removed the row,
// where it said that A (whose equality delete of the key's older rows is
// still live) deleted the key, and after a compaction dropped that delete,
// that no record ever had it.
func TestWhereKeyTruncateExpired(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.trunc_exp"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.trunc_exp", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0), dbzEvent(topic, "c", 2, "two@x", 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{dbzTruncate(topic, 2)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 3, "three@x", 3)})
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
	truncCommit := l.Commits[len(l.Commits)-2].SnapshotID
	where := func() lookup.KeyResult {
		t.Helper()
		if err := tbl.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":1}`)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (%s): %s", r.Status, r.FoundBy, r.Explanation)
		return r
	}
	if r := where(); r.Status != lookup.KeyStatusDeleted || r.FoundBy != lookup.FoundByTruncate || r.SnapshotID == nil || *r.SnapshotID != truncCommit || r.Uncertain != "" {
		t.Errorf("before expiry: status %s, found by %s, uncertain %q; want deleted by truncate %d: %s", r.Status, r.FoundBy, r.Uncertain, truncCommit, r.Explanation)
	}
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	if r := where(); r.Status != lookup.KeyStatusDeleted || !strings.Contains(r.Uncertain, "truncate") || !strings.HasSuffix(r.Explanation, r.Uncertain) {
		t.Errorf("after expiry: status %s, found by %s, uncertain %q; want deleted, and a truncate left open: %s", r.Status, r.FoundBy, r.Uncertain, r.Explanation)
	}
	// A compaction then drops the equality deletes (no data file older
	// than them is left).
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := where(); !strings.Contains(r.Uncertain, "truncate") || !strings.HasSuffix(r.Explanation, r.Uncertain) || !strings.Contains(r.Explanation, "not for a key of decoded columns") {
		t.Errorf("after expiry and compaction: status %s, uncertain %q; want a truncate left open: %s", r.Status, r.Uncertain, r.Explanation)
	}
}
