package snapshot_test

import (
	"errors"
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

func TestEmptyBranchAndPublish(t *testing.T) {
	cat := tempCatalog(t)
	iv := func(lo, hi int64) mapping.Interval { return mapping.Interval{Low: lo, High: hi} }
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
