package connector_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// truncatedTable sinks into a new Debezium table lake.NAME, from topic
// dbserver1.inventory.NAME: ids 1 and 2 (commit A), a truncate (commit T,
// --on-truncate delete-all), then id 3 when after is set (commit B). It
// returns the table, refreshed, and the sink's configuration.
func truncatedTable(t *testing.T, e *env, name string, after bool) (*snapshot.Table, connector.Config) {
	t.Helper()
	topic := "dbserver1.inventory." + name
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake."+name, floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	batches := [][]*kgo.Record{{dbzEvent(topic, "c", 1, "one@x", 0), dbzEvent(topic, "c", 2, "two@x", 1)}, {dbzTruncate(topic, 2)}}
	if after {
		batches = append(batches, []*kgo.Record{dbzEvent(topic, "c", 3, "three@x", 3)})
	}
	for _, b := range batches {
		e.Produce(b)
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	return tbl, cfg
}

// whereKey is lookup.WhereKey of key in tbl, refreshed, with the broker.
func whereKey(t *testing.T, e *env, tbl *snapshot.Table, key string) lookup.KeyResult {
	t.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), key)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%s): %s", r.Status, r.FoundBy, r.Explanation)
	return r
}

// tableWhereKey is lookup.WhereKey of key in tbl, refreshed, without the
// broker: what the table alone tells.
func tableWhereKey(t *testing.T, e *env, tbl *snapshot.Table, key string) lookup.KeyResult {
	t.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	r, err := lookup.WhereKey(e.Ctx, tbl, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("without the broker: %s (%s): %s", r.Status, r.FoundBy, r.Explanation)
	return r
}

// expireAllButHead runs floe maintain's expiry keeping the head alone.
func expireAllButHead(t *testing.T, e *env, tbl *snapshot.Table) {
	t.Helper()
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
}

// TestWhereKeyTruncateExpired (from a review): id 1 upserted (commit A),
// the table truncated (commit T, --on-truncate delete-all), then id 3
// inserted (commit B). where --key {"id":1} names T; once floe maintain
// expired every snapshot but the head, floe can no longer read the table
// before T, and the answer says that a truncate may have removed the row,
// where it said that A (whose equality delete of the key's older rows is
// still live) deleted the key, and after a compaction dropped that delete,
// that no record ever had it. The log, searched by decoding the records,
// names A's record of the key, which gave it the row.
func TestWhereKeyTruncateExpired(t *testing.T) {
	e := newEnv(t)
	tbl, _ := truncatedTable(t, e, "trunc_exp", true)
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	truncCommit := l.Commits[len(l.Commits)-2].SnapshotID
	if r := whereKey(t, e, tbl, `{"id":1}`); r.Status != lookup.KeyStatusDeleted || r.FoundBy != lookup.FoundByTruncate || r.SnapshotID == nil || *r.SnapshotID != truncCommit || r.Uncertain != "" {
		t.Errorf("before expiry: status %s, found by %s, uncertain %q; want deleted by truncate %d: %s", r.Status, r.FoundBy, r.Uncertain, truncCommit, r.Explanation)
	}
	expireAllButHead(t, e, tbl)
	if r := tableWhereKey(t, e, tbl, `{"id":1}`); r.Status != lookup.KeyStatusDeleted || !strings.Contains(r.Uncertain, "truncate") || !strings.HasSuffix(r.Explanation, r.Uncertain) {
		t.Errorf("after expiry: status %s, found by %s, uncertain %q; want deleted, and a truncate left open: %s", r.Status, r.FoundBy, r.Uncertain, r.Explanation)
	}
	// The log tells: the newest equality delete holding the key is A's, of
	// its older rows, and T's truncate came after A's record.
	checkLog := func(when string) {
		t.Helper()
		if r := whereKey(t, e, tbl, `{"id":1}`); r.Status != lookup.KeyStatusDeleted || r.FoundBy != lookup.FoundByTruncate || r.Offset == nil || *r.Offset != 2 || r.Uncertain != "" {
			t.Errorf("%s, with the broker: status %s, found by %s, uncertain %q; want deleted by the truncate at offset 2: %s", when, r.Status, r.FoundBy, r.Uncertain, r.Explanation)
		}
	}
	checkLog("after expiry")
	// A compaction then drops the equality deletes (no data file older
	// than them is left).
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := tableWhereKey(t, e, tbl, `{"id":1}`); !strings.Contains(r.Uncertain, "truncate") || !strings.HasSuffix(r.Explanation, r.Uncertain) {
		t.Errorf("after expiry and compaction: status %s, uncertain %q; want a truncate left open: %s", r.Status, r.Uncertain, r.Explanation)
	}
	checkLog("after expiry and compaction")
}

// TestWhereKeyTruncateExpiredSettingChanged (from a review): as in
// TestWhereKeyTruncateExpired, then a sink run with --on-truncate
// dead-letter, which records that setting in the table (floe.on-truncate).
// The table did take a truncate in the expired history (floe.truncated
// says so for good), so the answer still says a truncate may have removed
// the row, where it read the current setting and said nothing.
func TestWhereKeyTruncateExpiredSettingChanged(t *testing.T) {
	e := newEnv(t)
	tbl, cfg := truncatedTable(t, e, "trunc_exp2", true)
	expireAllButHead(t, e, tbl)
	cfg.OnTruncate = connector.TruncateDeadLetter
	e.Produce([]*kgo.Record{dbzEvent(cfg.Topic, "c", 4, "four@x", 4)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if r := tableWhereKey(t, e, tbl, `{"id":1}`); r.Uncertain == "" {
		t.Errorf("where --key {\"id\":1}: %s, no uncertainty; the table took a truncate (delete-all) in its expired history, which may have removed the row: %s", r.Status, r.Explanation)
	}
}

// TestWhereKeyTruncateIsHead (from a review): id 1 upserted (A), the
// table truncated (T, --on-truncate delete-all), and expiry kept only the
// head, T itself. T's summary says it removed data files (a floe commit),
// but its parent is expired: the answer names T as the truncate that may
// have removed the row, where it placed a truncate below T, in expired
// history.
func TestWhereKeyTruncateIsHead(t *testing.T) {
	e := newEnv(t)
	tbl, _ := truncatedTable(t, e, "trunc_head", false)
	expireAllButHead(t, e, tbl)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	head := tbl.Head().SnapshotID
	if r := tableWhereKey(t, e, tbl, `{"id":1}`); !strings.Contains(r.Uncertain, fmt.Sprintf("snapshot %d, a truncate", head)) {
		t.Errorf("where --key {\"id\":1}: the head %d is the truncate (it removed data files), but the answer does not name it: %s", head, r.Explanation)
	}
}
