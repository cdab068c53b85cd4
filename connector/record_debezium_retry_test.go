package connector_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestRecordDebeziumSettingsRetried: a sink given --on-truncate delete-all
// for a Debezium table that records another setting records it first, a
// commit of the table's properties. When the catalog is away for that
// commit, the sink retries it as any session start (Config.RetryFor). It
// stopped at once: the recording ran before the retry loop (found by a
// helper's review of the retries).
func TestRecordDebeziumSettingsRetried(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.recretry"
	e.Topic(topic, 1, nil)
	e.Produce([]*kgo.Record{dbzEvent(topic, "c", 1, "one@x", 0)})
	bc := &blipCatalog{faultCatalog: e.newFaultCatalog("lake.recretry")}
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	tbl, err := snapshot.Open(e.Ctx, bc, bc.ident, snapshot.OpenOptions{Create: true, Layout: cdcLayout(t, floetest.CDCPlainJSON), Mode: mapping.ModeUpsert, Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	// Loaded through the blipCatalog: the created table commits through
	// the catalog under it.
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	bc.commitsDown.Store(true)
	retries := 0
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, OnTruncate: connector.TruncateDeleteAll, RetryFor: time.Minute,
		OnRetry: func(err error, _ time.Duration) {
			t.Logf("retry: %v", err)
			retries++
			bc.commitsDown.Store(false)
		}})
	if err != nil || retries == 0 || stats.Commits == 0 {
		t.Fatalf("%+v after %d retries: %v; want the catalog's blip retried and the record sunk", stats, retries, err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if got := tbl.Iceberg().Properties()[mapping.PropOnTruncate]; got != string(connector.TruncateDeleteAll) {
		t.Fatalf("the table records on-truncate %q, want %s", got, connector.TruncateDeleteAll)
	}
}
