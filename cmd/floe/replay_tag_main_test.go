package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
)

// TestReplayPublishTagsMain: a publish replaces main's history with the
// branch's, which floe as-of then no longer reaches (a new user lost the
// table's time travel unwarned). Without --tag-main the publish says so;
// with it, the publish's commit tags main's previous head, which an
// Iceberg reader scans as the table was; a tag name the table already has
// is refused before the replay writes anything.
func TestReplayPublishTagsMain(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc)...)
	before := foreignTable(t, st.Catalog(), "lake.orders").CurrentSnapshot().SnapshotID
	replay := func(branch string, extra ...string) (int, string, string) {
		return floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders",
			"--from", "0=50,1=50,2=50", "--branch", branch, "--publish", "--publish-different"}, extra, loc)...)
	}
	code, out, errs := replay("late", "--tag-main", "before-late")
	if code != 0 || !strings.Contains(out, "main's previous head ") || !strings.Contains(out, "is tag before-late") {
		t.Fatalf("replay --tag-main: exit %d\n%s%s\nwant the publish to name the tag", code, out, errs)
	}
	tbl := foreignTable(t, st.Catalog(), "lake.orders")
	ref, ok := maps.Collect(tbl.Metadata().Refs())["before-late"]
	if !ok || ref.SnapshotRefType != table.TagRef || ref.SnapshotID != before {
		t.Fatalf("ref before-late: %+v (found %v); want a tag of main's previous head %d", ref, ok, before)
	}
	// The tag reads as the table was: all 300 events (an Iceberg reader's
	// scan), where main now holds the replay's from offset 50 on.
	rows, err := tbl.Scan(table.WithSnapshotID(before)).ToArrowTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Release()
	if rows.NumRows() != 300 {
		t.Errorf("the tag's snapshot scans %d rows, want the 300 main held before the publish", rows.NumRows())
	}
	code, out, errs = replay("later", "--tag-main", "before-late")
	if code != exitError || !strings.Contains(errs, "already has a tag named before-late") {
		t.Errorf("a second replay tagging before-late: exit %d\n%s%s\nwant exit 2 naming the tag", code, out, errs)
	}
	if _, ok := maps.Collect(foreignTable(t, st.Catalog(), "lake.orders").Metadata().Refs())["later"]; ok {
		t.Errorf("the refused replay created branch later: the name is checked before anything is written")
	}
	code, out, errs = replay("later2")
	if code != 0 || !strings.Contains(out, "floe as-of no longer reaches positions below the replay's first commit") || !strings.Contains(out, "--tag-main NAME") {
		t.Errorf("replay --publish without --tag-main: exit %d\n%s%s\nwant it to say main's history is on no branch now", code, out, errs)
	}
	code, _, errs = floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--branch", "x", "--tag-main", "t"}, loc)...)
	if code != exitError || !strings.Contains(errs, "--tag-main") || !strings.Contains(errs, "--publish") {
		t.Errorf("--tag-main without --publish: exit %d\n%s\nwant exit 2 naming both flags", code, errs)
	}
}
