package connector_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
)

// TestWhereKeyTruncatedInItsCommit (from a review): key 1 is inserted and
// the table truncated in the same flush (--on-truncate delete-all), then
// key 2 comes in a later commit. The key has no row because the truncate
// after its record removed it; the log search reads that truncate and
// names it, where it answered unknown (the table may have lost the row).
func TestWhereKeyTruncatedInItsCommit(t *testing.T) {
	e := newEnv(t)
	const name = "rev_s56_where_trunc"
	topic := "dbserver1.inventory." + name
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake."+name, floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	for _, b := range [][]*kgo.Record{{dbzEvent(topic, "c", 1, "one@x", 0), dbzTruncate(topic, 1)}, {dbzEvent(topic, "c", 2, "two@x", 2)}} {
		e.Produce(b)
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
	}
	r := whereKey(t, e, tbl, `{"id":1}`)
	if r.Status != lookup.KeyStatusDeleted || r.FoundBy != lookup.FoundByTruncate || r.Offset == nil || *r.Offset != 1 {
		t.Fatalf("status %s, found by %q: %s; want deleted by the truncate at offset 1", r.Status, r.FoundBy, r.Explanation)
	}
}
