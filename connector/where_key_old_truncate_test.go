package connector_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// TestWhereKeyOldTruncateAfterCompaction (from a review): with
// --on-truncate delete-all, customer 1 is created (commit 1), the table
// truncated (commit 2), customer 1 created again (commit 3) and deleted
// (commit 4, offset 4). floe maintain --compact then drops the equality
// deletes (no older data file is left for them). floe where --key
// {"id":1} --brokers must name the delete at offset 4, its last record,
// not the truncate of commit 2, which removed an older row of the key (the
// newest truncate whose parent held a row of the key, and with no delete
// file left the table alone cannot tell that the key came back). Without
// the broker the truncate is the answer, saying that a later delete may
// have been dropped.
func TestWhereKeyOldTruncateAfterCompaction(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.s57_old_trunc"
	// Commit 1: offsets 0, 1 (customers 1 and 2).
	tbl, cfg := e.truncatingTable(topic, "lake.s57_old_trunc")
	steps := [][]*kgo.Record{
		{dbzTruncate(topic, 2)},                   // commit 2: offset 2
		{dbzEvent(topic, "c", 1, "one@again", 3)}, // commit 3: offset 3
		{dbzEvent(topic, "d", 1, "one@again", 4)}, // commit 4: offset 4
		{dbzEvent(topic, "c", 3, "three@x", 5)},   // commit 5: offset 5, another key
	}
	for _, recs := range steps {
		e.Produce(recs)
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	got := rows(t, tbl)
	if len(got) != 1 || got[0].Columns["id"] != "3" {
		t.Fatalf("table %+v: want customer 3 only", got)
	}
	requireComplete(t, auditContent(t, e, tbl, nil), "the table")
	check := func(when string) {
		r := searchWhere(t, e, tbl, `{"id":1}`)
		if r.Status != lookup.KeyStatusDeleted || r.FoundBy == lookup.FoundByTruncate || deref32(r.Partition) != any(int32(0)) || deref64(r.Offset) != any(int64(4)) {
			t.Errorf("%s: where --key {\"id\":1} answers %s (found by %q) at offset %v, snapshot %v: want deleted by the record at offset 4 (commit 4); the truncate at offset 2 removed an older row of the key, which had a row again after it",
				when, r.Status, r.FoundBy, deref64(r.Offset), deref64(r.SnapshotID))
		}
	}
	check("before the compaction")
	res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compaction: %+v", res)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	check("after the compaction")
	if r := tableWhereKey(t, e, tbl, `{"id":1}`); r.Status != lookup.KeyStatusDeleted || r.FoundBy != lookup.FoundByTruncate || !strings.Contains(r.Uncertain, "--brokers") {
		t.Errorf("without the broker: %s by %q (uncertain %q): want deleted by the truncate, saying that --brokers reads a later delete compaction may have dropped", r.Status, r.FoundBy, r.Uncertain)
	}
}
