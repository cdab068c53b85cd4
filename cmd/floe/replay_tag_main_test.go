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
	if code != 0 || !strings.Contains(out, "main's history before it is on no branch now (the replay began where main's ledger did") || !strings.Contains(out, "--tag-main NAME") {
		t.Errorf("replay --publish without --tag-main: exit %d\n%s%s\nwant it to say main's history is on no branch now", code, out, errs)
	}
	code, _, errs = floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--branch", "x", "--tag-main", "t"}, loc)...)
	if code != exitError || !strings.Contains(errs, "--tag-main") || !strings.Contains(errs, "--publish") {
		t.Errorf("--tag-main without --publish: exit %d\n%s\nwant exit 2 naming both flags", code, errs)
	}
}

// TestReplayPublishSaysWhatAsOfLost (from a new user's run): every publish
// said floe as-of no longer reached positions below the replay's first
// commit, a replay from the table's first offset too, where as-of still
// answers them; and nothing said the branch stays. A replay of an append
// table from where main began says as-of reaches every position (and it
// does); one of an upsert table says which positions it no longer reaches;
// both say the branch is kept.
func TestReplayPublishSaysWhatAsOfLost(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "50"}, loc)...)
	out := mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--branch", "full", "--publish"}, loc)...)
	if strings.Contains(out, "no longer reaches") || !strings.Contains(out, "main's history before it is on no branch now (the replay began where main's ledger did, so floe as-of reaches the positions it reached before), and snapshot expiry removes it") ||
		!strings.Contains(out, "\n  branch full is kept, at the head main has now; floe drop --table lake.orders --branch full deletes it\n") {
		t.Fatalf("replay --publish from the table's first offset:\n%s", out)
	}
	if code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--offsets", "orders/0=5,orders/1=5,orders/2=5", "--rows"}, loc)...); code != exitOK || !strings.Contains(out, "\n15 rows") {
		t.Fatalf("as-of below the replay's first commit's end: exit %d\n%s%s", code, out, errs)
	}
	out = mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--from", "0=50,1=50,2=50",
		"--branch", "late", "--publish", "--publish-different"}, loc)...)
	if !strings.Contains(out, "main's history before it is on no branch now: main's ledger held orders/0 [0, 50), orders/1 [0, 50), orders/2 [0, 50) below the replay's start, which floe as-of no longer reaches, and snapshot expiry") {
		t.Fatalf("replay --publish from above main's first offsets:\n%s", out)
	}

	kst, kloc := keyedStack(t, "lake.u")
	out = mustFloe(t, slices.Concat([]string{"replay", "-b", kst.Brokers[0], "-t", "u", "--table", "lake.u", "--branch", "rebuild", "--publish"}, kloc)...)
	if !strings.Contains(out, "main's history before it is on no branch now: floe as-of no longer reaches positions within the replay's first commit") || !strings.Contains(out, "branch rebuild is kept") {
		t.Fatalf("replay --publish of an upsert table:\n%s", out)
	}
}
