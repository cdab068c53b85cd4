package snapshot_test

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestDropRefCutShortFindsNamedDeadLetterTable: a replay onto branch
// custom wrote its dead letters to a table of its own name (--dlq-table
// lake.custom_dlq), which only the branch's ledger names. A drop killed
// right after its commit left that table, and run again found only the
// default-named one: lake.custom_dlq stayed, named by nothing. The drop's
// commit records the tables it has still to drop (PropDroppingPrefix), so
// the second run drops it and clears the record.
func TestDropRefCutShortFindsNamedDeadLetterTable(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	if err := tbl.CreateEmptyBranch(t.Context(), "custom"); err != nil {
		t.Fatal(err)
	}
	branch := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{Branch: "custom"})
	bdlq, err := snapshot.OpenDeadLetters(t.Context(), cat, []string{"lake", "custom_dlq"}, tbl.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	mustDeadCommit(t, branch, bdlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)

	quiet := slog.New(slog.DiscardHandler)
	hc := &hookCatalog{Catalog: cat, dieAfterCommit: true}
	killed := openTestTable(t, hc, "lake.orders", snapshot.OpenOptions{})
	if _, err := killed.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{}); !errors.Is(err, errKilled) || !hc.dead {
		t.Fatalf("drop killed after its commit: %v (commit landed: %v)", err, hc.dead)
	}
	again := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{})
	if again.HasBranch("custom") {
		t.Fatal("the killed drop's commit did not land")
	}
	got, err := again.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{})
	if err != nil {
		t.Fatalf("drop run again: %v", err)
	}
	if !got.Gone || len(got.DeadLetterTables) != 1 || got.DeadLetterTables[0].Table != "lake.custom_dlq" {
		t.Fatalf("drop run again: %+v, want the branch gone and lake.custom_dlq dropped", got)
	}
	if _, err := snapshot.OpenDeadLetters(t.Context(), cat, []string{"lake", "custom_dlq"}, tbl.Name(), false); !errors.Is(err, snapshot.ErrTableNotFound) {
		t.Fatalf("lake.custom_dlq after the drop: %v, want it gone", err)
	}
	if _, ok := again.Iceberg().Properties()[snapshot.PropDroppingPrefix+"custom"]; ok {
		t.Error("the drop left its record of the tables to drop")
	}
	if _, err := again.DropRef(t.Context(), quiet, "custom", snapshot.DropRefOptions{}); err == nil {
		t.Error("a third drop of the branch found something to drop")
	}
}

// TestDropRefKeepsDeadLetterTableOfBranchDifferingInCase: branches a and
// A share a dead-letter table in Glue, which lowercases table names
// (lake.orders_A_dlq is lake.orders_a_dlq there). Dropping a while A is
// a branch (a replay onto it writes there before its ledger names it)
// keeps the table, as the replay's refusal of such a branch ignores case.
func TestDropRefKeepsDeadLetterTableOfBranchDifferingInCase(t *testing.T) {
	cat, tbl, _ := deadLetterTables(t)
	own := snapshot.BranchDeadLetterName(tbl.Identifier(), "a")
	branchWithDeadLetters(t, cat, tbl, "a", own, 0)
	if err := tbl.CreateEmptyBranch(t.Context(), "A"); err != nil {
		t.Fatal(err)
	}
	got, err := tbl.DropRef(t.Context(), slog.New(slog.DiscardHandler), "a", snapshot.DropRefOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.DeadLetterTables) != 0 || !slices.Equal(got.KeptDeadLetterTables, []string{strings.Join(own, ".")}) {
		t.Errorf("drop of branch a beside branch A: dropped %+v, kept %v; want %s kept", got.DeadLetterTables, got.KeptDeadLetterTables, strings.Join(own, "."))
	}
	if !dlqExists(t, cat, tbl, own) {
		t.Errorf("the drop of branch a dropped %s, which branch A writes to in a catalog that lowercases names", strings.Join(own, "."))
	}
	want := []string{"a replay onto branch A writes to it (that branch's name makes the same table name)"}
	if why := got.KeptBecause[strings.Join(own, ".")]; !slices.Equal(why, want) {
		t.Errorf("drop of branch a keeps %s because %q; want %q alone", strings.Join(own, "."), why, want)
	}
}
