package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
)

// TestDropPublishedBranchUnderRolledBackMainKeepsItsDeadLetters: a
// replay's branch is published (main's ledger then names the branch's
// dead-letter table), main is rolled back to the tag --tag-main made (by
// another engine: floe maintain keeps the files of a rolled-back commit's
// dead letters, as "the rollback may be undone"), and the branch is
// dropped. Undoing the rollback (main set back to the published head,
// which the table still has) and the next maintenance must find main's
// dead letters: floe drop
// --branch must not delete the dead-letter table of commits main's history
// made, whatever ref points at them at the time (review s60b).
func TestDropPublishedBranchUnderRolledBackMainKeepsItsDeadLetters(t *testing.T) {
	st, loc, brokers := dropRefStack(t)
	mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json",
		"--branch", "rebuild", "--publish", "--tag-main", "pre"}, loc)...)
	tbl := openTable(t, st.Catalog(), "lake.orders")
	refs := maps.Collect(tbl.Iceberg().Metadata().Refs())
	published, pre := refs["main"].SnapshotID, refs["pre"].SnapshotID
	setMain := setMainOf(t, st, tbl.Identifier())
	setMain(published, pre) // a rollback by another engine

	out := mustFloe(t, slices.Concat([]string{"drop", "--table", "lake.orders", "--branch", "rebuild", "--yes"}, loc)...)
	t.Logf("drop:\n%s", out)

	setMain(pre, published) // the rollback undone
	if !replayTableExists(t, st, "lake.orders_rebuild_dlq") {
		t.Errorf("drop --branch of a published branch deleted lake.orders_rebuild_dlq, whose dead letters main's history (set back) names")
	}
	// Reconciling took the rolled-back commit's rows out, as it does
	// without a drop; the next maintenance (or sink session) adds them
	// again from the files it kept.
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders"}, loc)...)
	if code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.orders", "--brokers", brokers}, loc)...); code != exitOK {
		t.Errorf("audit of main with the rollback undone: exit %d\n%s%s", code, out, errs)
	}
	if out := mustFloe(t, slices.Concat([]string{"dead-letters", "--table", "lake.orders"}, loc)...); !strings.Contains(out, "1 dead letter") {
		t.Errorf("main's dead letters with the rollback undone:\n%s", out)
	}
}

// setMainOf returns a function that sets main of table ident from
// snapshot from to snapshot to, as another engine's rollback (or its undo)
// does: one catalog commit asserting main's head.
func setMainOf(t *testing.T, st *localstack.Stack, ident table.Identifier) func(from, to int64) {
	t.Helper()
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	return func(from, to int64) {
		t.Helper()
		if _, _, err := cat.CommitTable(t.Context(), ident, []table.Requirement{table.AssertRefSnapshotID("main", &from)},
			[]table.Update{table.NewSetSnapshotRefUpdate("main", to, table.BranchRef, 0, 0, 0)}); err != nil {
			t.Fatal(err)
		}
	}
}
