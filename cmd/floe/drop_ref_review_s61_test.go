package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// TestDropPublishedBranchAfterItsHeadExpiredUnderRolledBackMain (review
// s61): keepRolledBack keeps a published branch's dead-letter table while
// "the head the publish made main's is still a snapshot of the table",
// and docs say running the drop again once maintenance expired that
// snapshot drops it. But maintenance expires the published head H while
// keeping younger snapshots that descend from it (main's head M1, a commit
// made on main after the publish): H's ledger entries are archived and
// M1's ledger names the branch's dead-letter table through them. Main is
// then rolled back to the tag --tag-main made (another engine), the drop
// is run again and deletes the dead-letter table with its files (H is
// gone), and undoing the rollback (main set back to M1, which the table
// has) finds main's dead letters of the replayed stretch gone for good.
func TestDropPublishedBranchAfterItsHeadExpiredUnderRolledBackMain(t *testing.T) {
	st, loc, brokers := dropRefStack(t)
	mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json",
		"--branch", "rebuild", "--publish", "--tag-main", "pre"}, loc)...)
	// M1: a commit on main after the publish, younger than the retention.
	tbl := sinkPastRetention(t, st, loc, brokers)
	refs := maps.Collect(tbl.Iceberg().Metadata().Refs())
	m1, pre := refs["main"].SnapshotID, refs["pre"].SnapshotID
	m1At := time.UnixMilli(tbl.Head().TimestampMs)
	published := refs["rebuild"].SnapshotID

	// The branch dropped once: its dead-letter table stays, main's ledger
	// names it.
	out := mustFloe(t, slices.Concat([]string{"drop", "--table", "lake.orders", "--branch", "rebuild", "--yes"}, loc)...)
	t.Logf("first drop:\n%s", out)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders", "--expire-older-than", shortRetention.String(), "--retain-last", "1"}, loc)...)
	if time.Since(m1At) >= shortRetention {
		t.Skipf("the machine was too slow: M1 is older than the retention already (%s)", time.Since(m1At))
	}
	tbl = openTable(t, st.Catalog(), "lake.orders")
	if tbl.Iceberg().Metadata().SnapshotByID(published) != nil {
		t.Fatalf("maintain kept the published head %d: the scenario needs it expired", published)
	}
	if tbl.Iceberg().Metadata().SnapshotByID(m1) == nil {
		t.Fatalf("maintain expired main's head %d", m1)
	}

	setMain := setMainOf(t, st, tbl.Identifier())
	setMain(m1, pre) // a rollback by another engine
	// Run again, as the first drop's output says: the table stays, and
	// the drop says so (it answered "no branch named rebuild").
	code, out, errs := floe(t, slices.Concat([]string{"drop", "--table", "lake.orders", "--branch", "rebuild", "--yes"}, loc)...)
	if code != exitOK || !strings.Contains(out, "branch rebuild of lake.orders was dropped before: nothing of it is left to drop") ||
		!strings.Contains(out, "lake.orders_rebuild_dlq stays") {
		t.Errorf("drop run again: exit %d\n%s%s", code, out, errs)
	}
	setMain(pre, m1) // the rollback undone

	if !replayTableExists(t, st, "lake.orders_rebuild_dlq") {
		t.Errorf("drop --branch deleted lake.orders_rebuild_dlq, whose dead letters main's history (set back to %d, which descends from the expired published head) names", m1)
	}
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders"}, loc)...)
	if code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.orders", "--brokers", brokers}, loc)...); code != exitOK {
		t.Errorf("audit of main with the rollback undone: exit %d\n%s%s", code, out, errs)
	}
	if out := mustFloe(t, slices.Concat([]string{"dead-letters", "--table", "lake.orders"}, loc)...); !strings.Contains(out, "1 dead letter") {
		t.Errorf("main's dead letters with the rollback undone:\n%s", out)
	}
}

// TestUndonePublishAfterPartialExpiryKeepsDeadLetters (review s61): a
// replay is published without --tag-main; main's previous head P (a
// young commit) and the older commit before it, which has a dead letter,
// are no ref's any more. floe maintain past the older commit's age
// expires it (archiving its ledger entry) and keeps P; the publish is
// then undone (main set back to P, which the table has). P's ledger names
// the older commit's dead letters through the archive, and they must
// still be there: the same keptFiles gap as
// TestReviewS61UndoneRollbackAfterPartialExpiryKeepsDeadLetters
// (connector), reached through a publish.
func TestUndonePublishAfterPartialExpiryKeepsDeadLetters(t *testing.T) {
	st, loc, brokers := dropRefStack(t) // a commit with a dead letter
	tbl := sinkPastRetention(t, st, loc, brokers)
	p := tbl.Head().SnapshotID
	pAt := time.UnixMilli(tbl.Head().TimestampMs)
	mustFloe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json",
		"--branch", "rebuild", "--publish"}, loc)...)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders", "--expire-older-than", shortRetention.String(), "--retain-last", "1"}, loc)...)
	if time.Since(pAt) >= shortRetention {
		t.Skipf("the machine was too slow: P is older than the retention already (%s)", time.Since(pAt))
	}
	tbl = openTable(t, st.Catalog(), "lake.orders")
	if tbl.Iceberg().Metadata().SnapshotByID(p) == nil {
		t.Fatalf("maintain expired main's previous head %d", p)
	}
	setMainOf(t, st, tbl.Identifier())(tbl.Head().SnapshotID, p)
	code, out, errs := floe(t, slices.Concat([]string{"maintain", "--table", "lake.orders"}, loc)...)
	t.Logf("maintain after the undo: exit %d\n%s%s", code, out, errs)
	if code, out, errs := floe(t, slices.Concat([]string{"audit", "--table", "lake.orders", "--brokers", brokers}, loc)...); code != exitOK {
		t.Errorf("audit of main with the publish undone: exit %d\n%s%s", code, out, errs)
	}
}

// shortRetention is the expiry age of this file's tests: the commits made
// before sinkPastRetention are older, the one it makes younger.
const shortRetention = 8 * time.Second

// sinkPastRetention waits past shortRetention, then sinks one more record of
// orders/0 into lake.orders, and returns the table with that young commit
// as main's head.
func sinkPastRetention(t *testing.T, st *localstack.Stack, loc []string, brokers string) *snapshot.Table {
	t.Helper()
	time.Sleep(shortRetention + 2*time.Second)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "orders", Partition: 0, Value: []byte(`{"id":1}`)}}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--value", "json", "--stop-at-end"}, loc)...)
	return openTable(t, st.Catalog(), "lake.orders")
}
