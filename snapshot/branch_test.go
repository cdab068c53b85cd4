package snapshot_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func TestEmptyBranchAndPublish(t *testing.T) {
	cat := tempCatalog(t)
	main := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{Create: true})
	commitRecs(t, main, map[int32]mapping.Interval{0: iv(0, 2)}, testRec{0, 0, "a", "old", 0}, testRec{0, 1, "b", "old", 0})
	oldRows := joinLines(snapshotRows(t, main, 0))
	oldHead := main.Head().SnapshotID

	if err := main.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatal(err)
	}
	if err := main.CreateEmptyBranch(t.Context(), "rebuild"); err == nil {
		t.Fatal("created an existing branch again")
	}
	if !main.HasBranch("rebuild") || main.HasBranch("nope") {
		t.Fatal("HasBranch is wrong")
	}
	br := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{Branch: "rebuild"})
	if rows := snapshotRows(t, br, 0); len(rows) != 0 {
		t.Fatalf("new branch holds main's rows: %v", rows)
	}
	if l, err := br.Ledger(); err != nil || len(l.Commits) != 0 {
		t.Fatalf("new branch ledger %+v, %v: want empty (it must not inherit main's)", l, err)
	}
	commitRecs(t, br, map[int32]mapping.Interval{0: iv(0, 3)}, testRec{0, 0, "a", "new", 0}, testRec{0, 1, "b", "new", 0}, testRec{0, 2, "c", "new", 0})
	newRows := joinLines(snapshotRows(t, br, 0))

	if err := main.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := joinLines(snapshotRows(t, main, 0)); got != oldRows || main.Head().SnapshotID != oldHead {
		t.Fatalf("a commit on the branch changed main:\n%s", got)
	}

	from, to, err := br.Publish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if from != oldHead || to != br.Head().SnapshotID {
		t.Fatalf("publish %d -> %d, want %d -> %d", from, to, oldHead, br.Head().SnapshotID)
	}
	if err := main.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := joinLines(snapshotRows(t, main, 0)); got != newRows {
		t.Fatalf("main after publish:\n%s\nwant:\n%s", got, newRows)
	}
	l, err := main.Ledger()
	if err != nil || len(l.Commits) != 1 || l.Next()[mapping.TopicPartition{Topic: "t", Partition: 0}] != 3 {
		t.Fatalf("main's ledger after publish %+v, %v: want the branch's one commit", l, err)
	}
	// Publishing again is a no-op; publishing from main is refused.
	if from, to, err := br.Publish(t.Context()); err != nil || from != to {
		t.Fatalf("second publish: %d -> %d, %v", from, to, err)
	}
	if _, _, err := main.Publish(t.Context()); err == nil {
		t.Fatal("published main onto itself")
	}
	if err := main.CreateEmptyBranch(t.Context(), "main"); err == nil || errors.Is(err, snapshot.ErrPublishRace) {
		t.Fatalf("created a branch named main: %v", err)
	}
}

// TestCreateBranchBesideLiveSink: floe replay --branch creates its empty
// branch beside a live sink on main, which commits twice while the
// branch's manifest list is written. The branch's snapshot has no parent,
// and iceberg-go adds such a snapshot without checking its sequence
// number: taken from the table as reloaded before the sink's commits, it
// lowered the table's last sequence number below theirs, and no one could
// load the table again (from a review). The branch's commit asserts every
// branch's head, fails, and is made again on the fresh table.
func TestCreateBranchBesideLiveSink(t *testing.T) {
	cat := tempCatalog(t)
	sink := openTestTable(t, cat, "lake.live", snapshot.OpenOptions{Create: true})
	commitRecs(t, sink, map[int32]mapping.Interval{0: iv(0, 1)}, testRec{0, 0, "a", "v0", 0})
	hc := &hookCatalog{Catalog: cat}
	replay := openTestTable(t, hc, "lake.live", snapshot.OpenOptions{})
	hc.beforeCommit = func() {
		commitRecs(t, sink, map[int32]mapping.Interval{0: iv(1, 2)}, testRec{0, 1, "b", "v1", 0})
		commitRecs(t, sink, map[int32]mapping.Interval{0: iv(2, 3)}, testRec{0, 2, "c", "v2", 0})
	}
	if err := replay.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatalf("create branch: %v", err)
	}
	if hc.beforeCommit != nil {
		t.Fatal("the sink did not commit in between: the test proved nothing")
	}
	if _, err := cat.LoadTable(t.Context(), sink.Identifier()); err != nil {
		t.Fatalf("the table can no longer be loaded: %v", err)
	}
	commitRecs(t, sink, map[int32]mapping.Interval{0: iv(3, 4)}, testRec{0, 3, "d", "v3", 0})
	if rows := snapshotRows(t, openTestTable(t, cat, "lake.live", snapshot.OpenOptions{Branch: "rebuild"}), 0); len(rows) != 0 {
		t.Fatalf("the new branch holds rows: %v", rows)
	}
}

// TestFirstCommitBesideAdvancedBranch: a replay commits twice onto a
// branch of a table whose main has no snapshot yet; then a sink, whose
// handle was loaded before, makes main's first commit. That snapshot has
// no parent and took its sequence number from the stale handle: the table
// was left with invalid metadata (from a review). A branch's first commit
// asserts the other branches' heads, and is made again on a fresh table.
func TestFirstCommitBesideAdvancedBranch(t *testing.T) {
	cat := tempCatalog(t)
	owner := openTestTable(t, cat, "lake.twin", snapshot.OpenOptions{Create: true})
	if err := owner.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatal(err)
	}
	sink := openTestTable(t, cat, "lake.twin", snapshot.OpenOptions{})
	replay := openTestTable(t, cat, "lake.twin", snapshot.OpenOptions{Branch: "rebuild"})
	commitRecs(t, replay, map[int32]mapping.Interval{0: iv(0, 1)}, testRec{0, 0, "a", "r0", 0})
	commitRecs(t, replay, map[int32]mapping.Interval{0: iv(1, 2)}, testRec{0, 1, "b", "r1", 0})
	commitRecs(t, sink, map[int32]mapping.Interval{0: iv(0, 1)}, testRec{0, 0, "a", "s0", 0})
	fresh, err := snapshot.Open(t.Context(), cat, owner.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatalf("the table can no longer be opened: %v", err)
	}
	if rows := snapshotRows(t, fresh, 0); len(rows) != 1 {
		t.Fatalf("main holds %v, want the sink's one row", rows)
	}
}

// TestCommitAnswerLostThenPublishedOverKeepsFiles: a sink's commit lands
// but its answer is lost, and before the retry reloads a replay publishes
// its branch over main. The retry is fenced, and keeps the files of its
// snapshot, which the table still has (main's head until the publish; a
// rollback of the publish returns to it).
func TestCommitAnswerLostThenPublishedOverKeepsFiles(t *testing.T) {
	cat := tempCatalog(t)
	main := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{Create: true})
	commitRecs(t, main, map[int32]mapping.Interval{0: iv(0, 2)}, testRec{0, 0, "a", "v0", 0}, testRec{0, 1, "b", "v1", 0})
	if err := main.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatal(err)
	}
	hc := &hookCatalog{Catalog: cat, loseReply: true, afterLanding: func() {
		br := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{Branch: "rebuild"})
		commitRecs(t, br, map[int32]mapping.Interval{0: iv(0, 3)}, testRec{0, 0, "a", "v0", 0}, testRec{0, 1, "b", "v1", 0}, testRec{0, 2, "c", "v2", 0})
		if _, _, err := br.Publish(t.Context()); err != nil {
			t.Error(err)
		}
	}}
	sink := openTestTable(t, hc, "lake.events", snapshot.OpenOptions{})
	f := flushOf(t, sink, map[int32]mapping.Interval{0: iv(2, 4)}, testRec{0, 2, "c", "v2", 0}, testRec{0, 3, "d", "v3", 0})
	_, err := sink.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "sink"})
	fenced, ok := errors.AsType[*snapshot.FencedError](err)
	if !ok || fenced.Kept == 0 {
		t.Fatalf("err = %v, want a FencedError keeping the landed snapshot", err)
	}
	fresh := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{})
	if rows := snapshotRows(t, fresh, fenced.Kept); len(rows) != 4 {
		t.Fatalf("snapshot %d, main's head before the publish, reads %v, want 4 rows", fenced.Kept, rows)
	}
}

func iv(lo, hi int64) mapping.Interval { return mapping.Interval{Low: lo, High: hi} }

// TestPublishBesideFasterWriterNamesTheFix (from a review): a writer of
// main that commits before every attempt of a checked publish (a live sink
// flushing more often than floe replay's comparison takes) wins every
// race: the publish gives up with main unchanged, and says how to publish
// (stop the sinks, or flush them less often, and run it again). It said
// "publish raced with other commits" only.
func TestPublishBesideFasterWriterNamesTheFix(t *testing.T) {
	_, main, br := rebuildBesideMain(t)
	next := int64(1)
	checks := 0
	_, _, err := br.PublishChecked(t.Context(), "", func(context.Context, int64) error {
		checks++
		commitRecs(t, main, map[int32]mapping.Interval{0: iv(next, next+1)}, testRec{0, next, "a", "w", 0})
		next++
		return nil
	})
	if !errors.Is(err, snapshot.ErrPublishRace) || !strings.Contains(err.Error(), "stop it while publishing, then run the same command again") || checks != 5 {
		t.Fatalf("after %d checks: %v; want the race named with the fix", checks, err)
	}
	if err := main.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l, err := main.Ledger(); err != nil || l.Next()[mapping.TopicPartition{Topic: "t", Partition: 0}] != next {
		t.Fatalf("main after the refused publish: %+v, %v; want its own commits up to %d", l, err, next)
	}
}
