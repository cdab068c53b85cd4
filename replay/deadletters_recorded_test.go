package replay_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestReplayRecordsDeadLetterTable (from a review): a replay into a new
// table naming its dead-letter table (--dlq-table lake.bad) records it, as
// floe sink does, so a later sink of that table without --dlq-table writes
// into lake.bad too, not into lake.replayed_dlq.
func TestReplayRecordsDeadLetterTable(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	e.Produce([]*kgo.Record{{Topic: "orders", Value: []byte(`{"id":1}`)}, {Topic: "orders", Value: []byte(`oops`)}})
	bad, _ := catalog.ParseIdent("lake.bad")
	res, err := e.replay("lake.replayed", replay.Options{Topic: "orders", Layout: mapping.Layout{Value: mapping.ValueJSON}, DeadLetters: bad})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stats.DeadLetterTable != "lake.bad" {
		t.Fatalf("replay wrote dead letters into %q", res.Stats.DeadLetterTable)
	}
	if got := e.openExisting("lake.replayed", "").Iceberg().Properties()[snapshot.PropDeadLetterTable]; got != "lake.bad" {
		t.Errorf("recorded %s=%q, want lake.bad", snapshot.PropDeadLetterTable, got)
	}

	e.Produce([]*kgo.Record{{Topic: "orders", Value: []byte(`{"id":2}`)}, {Topic: "orders", Value: []byte(`oops again`)}})
	cat, ident := e.CatalogOf("lake.replayed")
	var stats connector.Stats
	p := connector.Pipeline{Table: ident, Config: connector.Config{Topic: "orders", StopAtEnd: true, Logger: quietLogger()},
		Layout: mapping.Layout{Value: mapping.ValueJSON},
		OnStop: func(_ *snapshot.Table, s connector.Stats, _ error) { stats = s }}
	if err := (connector.Pipelines{p}).Run(e.Ctx, e.Dial(), cat); err != nil {
		t.Fatal(err)
	}
	if stats.DeadLetterTable != "lake.bad" || e.exists("lake.replayed_dlq") {
		t.Errorf("a sink without --dlq-table after a replay with --dlq-table lake.bad wrote its dead letters into %q (lake.replayed_dlq exists: %v); want lake.bad, the one the table's first run named",
			stats.DeadLetterTable, e.exists("lake.replayed_dlq"))
	}
}
