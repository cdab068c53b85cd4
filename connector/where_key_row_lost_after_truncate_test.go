package connector_test

import (
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestWhereKeyRowLostAfterOldTruncate (from a review): customer 1
// is created (offset 0), the table truncated (offset 2), customer 1
// created again (offset 3); another key is created and deleted (the
// ledger counts deletes) and floe compacts the table. Then customer 1's
// row is lost without any delete of it (another engine's copy-on-write
// DELETE, or a bug: what floe audit --deep --verify-content flags).
// floe where --key {"id":1} --brokers reads the log: the key's last
// record, at offset 3, gave it a row after the truncate, so the truncate
// did not remove that row; the answer must say unknown (the row is gone
// without a delete), as it does for a key that never met a truncate, not
// "deleted by the truncate" with "a later record ... that the log no
// longer holds", though the log holds it.
func TestWhereKeyRowLostAfterOldTruncate(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.lost_row"
	tbl, cfg := e.truncatingTable(topic, "lake.lost_row") // offsets 0, 1: customers 1 and 2
	for _, recs := range [][]*kgo.Record{
		{dbzTruncate(topic, 2)},                   // offset 2
		{dbzEvent(topic, "c", 1, "one@again", 3)}, // offset 3: customer 1 again
		{dbzEvent(topic, "c", 4, "four@x", 4)},    // offset 4
		{dbzEvent(topic, "d", 4, "four@x", 5)},    // offset 5: a delete, of another key
	} {
		e.Produce(recs)
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	// Customer 1's row is lost, with no delete file.
	tx := tbl.Iceberg().NewTransaction()
	if err := tx.Delete(e.Ctx, iceberg.EqualTo(iceberg.Reference("id"), int64(1)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if got := rows(t, tbl); len(got) != 0 {
		t.Fatalf("setup: rows %+v, want none", got)
	}
	r := searchWhere(t, e, tbl, `{"id":1}`)
	if r.FoundBy == lookup.FoundByTruncate || r.Status != lookup.KeyStatusUnknown {
		t.Errorf("where --key {\"id\":1} --brokers: %s, found by %q, snapshot %v (%s); want unknown: the log's last record of the key (offset 3) gave it a row after the truncate, which cannot have removed it",
			r.Status, r.FoundBy, deref64(r.SnapshotID), r.Explanation)
	}
}
