package connector_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestReplayPublishRecordsPlaceholder: a Debezium table sunk without
// the connector's custom placeholder holds it in rows (docs/upsert.md: "a
// replay of the table rewrites it"). The repair: floe replay --branch
// rebuild --unavailable-placeholder X --publish(-different). The branch
// writer records no table property (only main's sink does), and publish
// records none either, so after the repair main's table still says
// Debezium's default: the content audit decodes the placeholder events
// as rows and reports the published table, and main's sink restarted
// without the flag writes the placeholder into rows again.
//
// Found by a review of the exactly-once path; fixed since.
func TestReplayPublishRecordsPlaceholder(t *testing.T) {
	e := newEnv(t)
	const topic, name, placeholder = "dbserver1.inventory.phrep", "lake.phrep", "<toast>"
	e.Topic(topic, 1, nil)
	event := func(op string, id int, bio string) *kgo.Record {
		return plainChangeEvent(t, topic, op, map[string]any{"id": id, "bio": bio})
	}
	e.Produce([]*kgo.Record{event("c", 1, "long text"), event("u", 1, placeholder), event("c", 2, "two")})
	tbl, dlq := e.debeziumTable(name, floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}
	if _, err := e.sink(tbl, cfg); err != nil { // without the placeholder: the wrong row
		t.Fatal(err)
	}
	cat, ident := e.CatalogOf(name)
	res, err := replay.Run(e.Ctx, e.Dial(), cat, ident, replay.Options{Topic: topic, Branch: "rebuild", Publish: true, PublishDifferent: true,
		Mode: mapping.ModeUpsert, Layout: cdcLayout(t, floetest.CDCPlainJSON),
		Sink: connector.Config{UnavailablePlaceholder: placeholder, Logger: quietLogger()}})
	if err != nil || !res.Complete {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	main, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(t, main) {
		if r.Columns["bio"] == placeholder {
			t.Fatalf("the published table holds the placeholder at offset %d", r.Offset)
		}
	}
	t.Logf("after publish: %s=%q", mapping.PropPlaceholder, main.Iceberg().Properties()[mapping.PropPlaceholder])
	rep, err := audit.Run(e.Ctx, main, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("audit of the repaired table: %+v", f)
	}
	// main's sink, restarted as it runs: without the flag
	e.Produce([]*kgo.Record{event("u", 2, placeholder)})
	mdlq, err := snapshot.OpenDeadLetters(e.Ctx, cat, snapshot.DeadLetterName(ident), main.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DeadLetters = mdlq
	if _, err := e.sink(main, cfg); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(t, main) {
		if r.Columns["bio"] == placeholder {
			t.Errorf("after the repair, main's sink wrote the placeholder into the row of offset %d", r.Offset)
		}
	}
}

// TestReplayPublishRecordsOnTruncate: the same for --on-truncate: a
// table whose sink dead-lettered truncates is rebuilt by a replay onto a
// branch with --on-truncate delete-all and published; main's table does
// not record delete-all, so main's sink restarted without the flag
// dead-letters the next truncate and keeps the rows the rebuilt table's
// rule deletes.
//
// Found by a review of the exactly-once path; fixed since.
func TestReplayPublishRecordsOnTruncate(t *testing.T) {
	e := newEnv(t)
	const topic, name = "dbserver1.inventory.phtrep", "lake.phtrep"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable(name, floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}
	e.Produce([]*kgo.Record{dbzEvent(topic, "r", 1, "one@x", 0), dbzEvent(topic, "r", 2, "two@x", 1), dbzTruncate(topic, 2)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	cat, ident := e.CatalogOf(name)
	res, err := replay.Run(e.Ctx, e.Dial(), cat, ident, replay.Options{Topic: topic, Branch: "rebuild", Publish: true, PublishDifferent: true,
		Mode: mapping.ModeUpsert, Layout: cdcLayout(t, floetest.CDCPlainJSON),
		Sink: connector.Config{OnTruncate: connector.TruncateDeleteAll, Logger: quietLogger()}})
	if err != nil || !res.Complete {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	main, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := latestIDs(t, main); len(got) != 0 {
		t.Fatalf("published table holds ids %v, want none (truncated)", got)
	}
	t.Logf("after publish: %s=%q", mapping.PropOnTruncate, main.Iceberg().Properties()[mapping.PropOnTruncate])
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 3, "three@x", 3), dbzTruncate(topic, 4)})
	mdlq, err := snapshot.OpenDeadLetters(e.Ctx, cat, snapshot.DeadLetterName(ident), main.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DeadLetters = mdlq
	if _, err := e.sink(main, cfg); err != nil {
		t.Fatal(err)
	}
	if got := latestIDs(t, main); len(got) != 0 {
		t.Errorf("after the repair with --on-truncate delete-all, main's sink kept ids %v through a truncate (dead-lettered it)", got)
	}
}
