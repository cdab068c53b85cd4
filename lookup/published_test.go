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

// TestLookupsNameThePublishMainDescendsFrom: main (sunk from offset 5) is
// replaced by a replay from 8 on branch early, then by one from 10 on
// branch late. Below main's first offset, as-of and where say main's
// history no longer reaches there, naming late alone: main's ledger is
// late's, and early's publish is not in main's history (they named every
// branch ever published). Once main is rolled back to its own head from
// before the publishes (an engine's rollback_to_snapshot), it descends from
// no publish: a position below its first offset is before the table's
// first record, with no note.
func TestLookupsNameThePublishMainDescendsFrom(t *testing.T) {
	e := floetest.New(t)
	e.Topic("pub", 1, nil)
	e.Produce(floetest.Records("pub", 0, 20, "a"))
	tbl := e.Table("lake.pub")
	sinkFrom := func(tbl *snapshot.Table, from int64) {
		t.Helper()
		if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "pub", StartOffsets: map[int32]int64{0: from}, StopAtEnd: true}); err != nil {
			t.Fatal(err)
		}
	}
	sinkFrom(tbl, 5)
	own := tbl.Head().SnapshotID
	var lateFirst int64
	for _, c := range []struct {
		branch string
		from   int64
	}{{"early", 8}, {"late", 10}} {
		if err := tbl.CreateEmptyBranch(t.Context(), c.branch); err != nil {
			t.Fatal(err)
		}
		br := e.OpenTable("lake.pub", snapshot.OpenOptions{Branch: c.branch})
		sinkFrom(br, c.from)
		if c.branch == "late" {
			// Two commits, for main to be rolled back into.
			lateFirst = br.Head().SnapshotID
			e.Produce(floetest.Records("pub", 0, 5, "b"))
			if _, err := e.Sink(e.Broker(), br, connector.Config{Topic: "pub", StopAtEnd: true}); err != nil || br.Head().SnapshotID == lateFirst {
				t.Fatalf("late's second commit: %v", err)
			}
		}
		if _, _, err := br.Publish(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	cat, ident := e.CatalogOf("lake.pub")
	rollBack := func(to int64) {
		t.Helper()
		if _, _, err := cat.CommitTable(t.Context(), ident, nil, []table.Update{table.NewSetSnapshotRefUpdate(table.MainBranch, to, table.BranchRef, 0, 0, 0)}); err != nil {
			t.Fatal(err)
		}
		if err := tbl.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: "pub", Partition: 0}
	// Main after the publishes, and main rolled back to late's first
	// commit, below the published head (from a review: the note was gone
	// there), both begin with late's ledger.
	for _, at := range []string{"after two publishes", "rolled back into late's commits"} {
		if at != "after two publishes" {
			rollBack(lateFirst)
		}
		_, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "0=9"})
		if _, ok := errors.AsType[*lookup.BeforeHistoryError](err); !ok || !strings.Contains(err.Error(), "a replay published from branch late replaced main's earlier commits") {
			t.Errorf("as-of 0=9 %s: %v; want main's history no longer reaching there, naming branch late alone", at, err)
		}
		r, err := lookup.Where(t.Context(), tbl, nil, tp, 9)
		if err != nil || !strings.Contains(r.Explanation, "since a replay was published onto it (branch late)") {
			t.Errorf("where 9 %s: %q, %v; want it not in main's history, naming branch late alone", at, r.Explanation, err)
		}
	}

	rollBack(own)
	res, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Offsets: "0=3"})
	if err != nil || !res.Empty {
		t.Errorf("as-of 0=3 on main rolled back before the publishes: %+v, %v; want the empty table", res, err)
	}
	r, err := lookup.Where(t.Context(), tbl, nil, tp, 3)
	if err != nil || !strings.Contains(r.Explanation, "was never sunk: the table holds pub/0 from offset 5 on") {
		t.Errorf("where 3 on main rolled back before the publishes: %q, %v; want it never sunk", r.Explanation, err)
	}
}
