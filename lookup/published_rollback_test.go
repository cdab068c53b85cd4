package lookup_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestLookupsAfterRollbackIntoPublishedHistory (from a review): main (sunk from offset 5)
// is replaced by a replay from 10 on branch late (two commits), then
// rolled back one commit, to the replay's first commit (an engine's
// rollback_to_snapshot of a bad last commit). Main's ledger is still the
// replay's, beginning at 10, and main held offsets 5..9 before the
// publish: as-of 0=9 and where 9 must still say main's history no longer
// reaches there. PublishedBranch looks for the published head among main's
// ancestors, and main now sits below it, so the note is gone: as-of
// answers the empty table and where says 9 was never sunk.
func TestLookupsAfterRollbackIntoPublishedHistory(t *testing.T) {
	e := floetest.New(t)
	e.Topic("pub", 1, nil)
	e.Produce(floetest.Records("pub", 0, 20, "a"))
	tbl := e.Table("lake.pub")
	sink := func(tbl *snapshot.Table, cfg connector.Config) {
		t.Helper()
		cfg.Topic, cfg.StopAtEnd = "pub", true
		if _, err := e.Sink(e.Broker(), tbl, cfg); err != nil {
			t.Fatal(err)
		}
	}
	sink(tbl, connector.Config{StartOffsets: map[int32]int64{0: 5}})
	if err := tbl.CreateEmptyBranch(t.Context(), "late"); err != nil {
		t.Fatal(err)
	}
	br := e.OpenTable("lake.pub", snapshot.OpenOptions{Branch: "late"})
	sink(br, connector.Config{StartOffsets: map[int32]int64{0: 10}})
	first := br.Head().SnapshotID
	e.Produce(floetest.Records("pub", 0, 5, "b"))
	sink(br, connector.Config{})
	if br.Head().SnapshotID == first {
		t.Fatal("the branch's second sink made no commit")
	}
	if _, _, err := br.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
	cat, ident := e.CatalogOf("lake.pub")
	if _, _, err := cat.CommitTable(t.Context(), ident, nil, []table.Update{table.NewSetSnapshotRefUpdate(table.MainBranch, first, table.BranchRef, 0, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	sum, err := tbl.Summary(t.Context(), 0)
	tp := mapping.TopicPartition{Topic: "pub", Partition: 0}
	if err != nil || sum.Parts[tp] == nil || sum.Parts[tp].First() != 10 {
		t.Fatalf("main rolled back to the replay's first commit: ledger %+v, %v; want it to begin at 10", sum, err)
	}
	res, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "0=9"})
	if _, ok := errors.AsType[*lookup.BeforeHistoryError](err); !ok {
		t.Errorf("as-of 0=9 on main rolled back within the published replay's history: %+v, %v; want main's history no longer reaching there (branch late)", res, err)
	}
	r, err := lookup.Where(t.Context(), tbl, nil, tp, 9)
	if err != nil || !strings.Contains(r.Explanation, "since a replay was published onto it (branch late)") {
		t.Errorf("where 9 on main rolled back within the published replay's history: %q, %v; want it not in main's history (branch late)", r.Explanation, err)
	}
}
