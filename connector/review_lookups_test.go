package connector_test

import (
	"errors"
	"fmt"
	"github.com/floe-dev/floe/mapping"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestWhereKeyTruncateExpiredSettingChanged (from a review): as in
// TestWhereKeyTruncateExpired, id 1 upserted (A), the table truncated (T,
// --on-truncate delete-all), id 3 inserted (B), and expiry kept only the
// head. Then a sink is run with --on-truncate dead-letter, which records
// that setting in the table (floe.on-truncate). The table did take a
// truncate in the expired history (floe.truncated says so for good), so
// the answer still says a truncate may have removed the row, where it
// read the current setting and said nothing.
func TestWhereKeyTruncateExpiredSettingChanged(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.trunc_exp2"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.trunc_exp2", floetest.CDCPlainJSON)
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
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	// From now on truncates go to the dead-letter table.
	cfg.OnTruncate = connector.TruncateDeadLetter
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 4, "four@x", 4)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("on-truncate now %q", tbl.Iceberg().Properties()["floe.on-truncate"])
	r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":1}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%s): %s", r.Status, r.FoundBy, r.Explanation)
	if r.Uncertain == "" {
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
	const topic = "dbserver1.inventory.trunc_head"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.trunc_head", floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0), dbzEvent(topic, "c", 2, "two@x", 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	e.Produce([]*kgo.Record{dbzTruncate(topic, 2)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	head := tbl.Head().SnapshotID
	r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":1}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("head %d, props %v; %s (%s): %s", head, tbl.Head().Summary.Properties["deleted-data-files"], r.Status, r.FoundBy, r.Explanation)
	if !strings.Contains(r.Uncertain, fmt.Sprintf("snapshot %d, a truncate", head)) {
		t.Errorf("where --key {\"id\":1}: the head %d is the truncate (it removed data files), but the answer places the truncate below it, in expired history: %s", head, r.Explanation)
	}
}

// TestWherePendingDeadLetterNotMissing (from a review): a flush whose
// rows committed but whose dead letter could not be added yet (a
// DeadLettersPendingError: the next sink run adds it). The dead letter's
// offset is accounted for by the ledger as a dead letter (the range counts
// it): where --brokers says the dead-letter table does not hold it (its
// dead letters are pending, or were removed), where it said "missing: the
// table lost it".
func TestWherePendingDeadLetterNotMissing(t *testing.T) {
	e := newEnv(t)
	const topic, table = "pendwhere", "lake.pendwhere"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TypedTable(table, mapping.Layout{Value: mapping.ValueJSON})
	// A first dead letter (offset 0) goes in, so the dead-letter table has a snapshot.
	e.Produce(jsonRecords(topic, 0, `bad`))
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	bad, _ := e.faultyDeadLetters(tbl)
	e.Produce(jsonRecords(topic, 0, `{"id":1}`, `oops`, `{"id":2}`)) // offsets 1-3
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: bad})
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](err); !ok {
		t.Fatalf("sink: %v, want a DeadLettersPendingError", err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	r, err := lookup.Where(e.Ctx, tbl, e.Broker(), mapping.TopicPartition{Topic: topic, Partition: 0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s/%s: %s", r.Status, r.Kind, r.Explanation)
	if r.Kind != lookup.KindDeadLetterNotFound {
		t.Errorf("where offset 2 (a dead letter whose addition is pending): kind %s; want %s: %s", r.Kind, lookup.KindDeadLetterNotFound, r.Explanation)
	}
}
