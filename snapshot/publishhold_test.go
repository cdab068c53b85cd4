package snapshot_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestPublishHoldsWritersOfMain: a writer of main that commits more often
// than a publish's check takes (a live sink on a short --flush-interval)
// won every attempt, and the publish gave up. Once main moved under an
// attempt, the publish asks main's writers to hold (PropPublishHold); a
// writer that honours it (AwaitPublish before each commit, as floe sink
// does) commits at most once more, the publish swaps main, lifting the
// hold in the same commit, and the writer's next commit is fenced by the
// published ledger.
func TestPublishHoldsWritersOfMain(t *testing.T) {
	cat, main, br := rebuildBesideMain(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type outcome struct {
		commits int
		held    time.Duration
		err     error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() { done <- o }()
		for next := int64(1); ctx.Err() == nil; next++ {
			o.held += main.AwaitPublish(ctx, slog.Default())
			f := flushOf(t, main, map[int32]mapping.Interval{0: iv(next, next+1)}, testRec{0, next, "a", "w", 0})
			if _, o.err = main.Commit(ctx, f, snapshot.CommitOptions{Writer: "sink"}); o.err != nil {
				return
			}
			o.commits++
			time.Sleep(10 * time.Millisecond)
		}
	}()
	checks := 0
	_, to, err := br.PublishChecked(t.Context(), "", func(context.Context, int64) error {
		checks++
		time.Sleep(300 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatalf("publish after %d checks: %v", checks, err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer of main was not fenced by the publish")
	}
	if !errors.Is(o.err, snapshot.ErrFenced) || o.held == 0 {
		t.Fatalf("writer after %d commits, held %v: %v; want it held, then fenced by the publish", o.commits, o.held, o.err)
	}
	fresh := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{})
	if fresh.Head().SnapshotID != to {
		t.Fatalf("main's head is %d, want the published %d", fresh.Head().SnapshotID, to)
	}
	if v, ok := fresh.Iceberg().Properties()[snapshot.PropPublishHold]; ok {
		t.Fatalf("the swap left the hold %q", v)
	}
	if checks > 3 {
		t.Fatalf("the publish took %d checks, want at most 3 (the hold set after the first)", checks)
	}
}

// TestPublishGivingUpLiftsItsHold: a writer of main that does not honour
// the hold (another engine, an older floe) still wins every attempt; the
// publish gives up, main unchanged, and lifts its hold so that main's
// other writers do not wait for it to end.
func TestPublishGivingUpLiftsItsHold(t *testing.T) {
	cat, main, br := rebuildBesideMain(t)
	next := int64(1)
	held := false
	_, _, err := br.PublishChecked(t.Context(), "", func(context.Context, int64) error {
		if err := main.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, h := main.PublishHold()
		held = held || h
		commitRecs(t, main, map[int32]mapping.Interval{0: iv(next, next+1)}, testRec{0, next, "a", "w", 0})
		next++
		return nil
	})
	if !errors.Is(err, snapshot.ErrPublishRace) || !held {
		t.Fatalf("publish: %v (hold seen: %v); want it to give up after holding main's writers", err, held)
	}
	fresh := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{})
	if v, ok := fresh.Iceberg().Properties()[snapshot.PropPublishHold]; ok {
		t.Fatalf("the publish that gave up left its hold %q", v)
	}
}

// TestPublishFoundDoneLiftsItsHold (from a review): a publish whose attempt
// lost the race sets the hold on main's writers; when its next attempt
// finds main already at the branch's head (a second run of the same
// publish, by an operator or a retried job, swapped it meanwhile), it
// returns success without lifting the hold, which the swap it lost to did
// not remove either (not set yet then): main's sinks hold every commit
// until it ends (30 s at least), for a publish that is over.
func TestPublishFoundDoneLiftsItsHold(t *testing.T) {
	cat, _, br := rebuildBesideMain(t)
	other := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{Branch: "rebuild"})
	checks := 0
	_, _, err := br.PublishChecked(t.Context(), "", func(context.Context, int64) error {
		checks++
		if checks == 1 {
			// The same publish, run again, swaps main first.
			if _, _, err := other.Publish(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	fresh := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{})
	if h, held := fresh.PublishHold(); held {
		t.Fatalf("the publish is over (main is the branch's head), but main's writers are held until %v (%q)", h.Until, fresh.Iceberg().Properties()[snapshot.PropPublishHold])
	}
}

// rebuildBesideMain returns a catalog whose table lake.events has offset 0
// of partition 0 on main, and a branch rebuild holding the same: a branch
// ready to publish, and its table open on main and on the branch.
func rebuildBesideMain(t *testing.T) (icecat.Catalog, *snapshot.Table, *snapshot.Table) {
	t.Helper()
	cat := tempCatalog(t)
	main := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{Create: true})
	commitRecs(t, main, map[int32]mapping.Interval{0: iv(0, 1)}, testRec{0, 0, "a", "v", 0})
	if err := main.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatal(err)
	}
	br := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{Branch: "rebuild"})
	commitRecs(t, br, map[int32]mapping.Interval{0: iv(0, 1)}, testRec{0, 0, "a", "v", 0})
	return cat, main, br
}

// TestCompactionHoldsForPublish: a compaction of main (floe compact, floe
// maintain --compact, a sink's --compact-interval) committed while a
// publish asked main's writers to hold, moving main under the publish's
// check; run on a schedule it could win every attempt. It holds its commit
// until the hold is lifted, then finds the files it merged swapped out of
// main by the publish and gives up, main left as published.
func TestCompactionHoldsForPublish(t *testing.T) {
	cat, main, br := rebuildBesideMain(t)
	for next := int64(1); next < 4; next++ {
		commitRecs(t, main, map[int32]mapping.Interval{0: iv(next, next+1)}, testRec{0, next, "a", "w", 0})
	}
	if err := main.SetProperties(t.Context(), map[string]string{
		snapshot.PropPublishHold: fmt.Sprintf("rebuild %d", time.Now().Add(time.Minute).UnixMilli()),
	}); err != nil {
		t.Fatal(err)
	}
	before := main.Head().SnapshotID
	compactor := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{})
	type outcome struct {
		res snapshot.CompactResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := compactor.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: slog.New(slog.DiscardHandler)})
		done <- outcome{res, err}
	}()
	time.Sleep(time.Second)
	if err := main.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if head := main.Head().SnapshotID; head != before {
		t.Fatalf("the compaction committed snapshot %d on main while a publish held main's writers", head)
	}
	_, to, err := br.Publish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the compaction still holds after the publish lifted the hold")
	}
	if o.res.SnapshotID != 0 {
		t.Fatalf("the compaction committed snapshot %d after the publish (err %v)", o.res.SnapshotID, o.err)
	}
	fresh := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{})
	if head := fresh.Head().SnapshotID; head != to {
		t.Fatalf("main's head is %d, want the published %d", head, to)
	}
}

// holdLosingCatalog answers the first lose commits that set
// PropPublishHold as lost to another writer (a conflict), as a writer of
// main committing every few milliseconds makes them.
type holdLosingCatalog struct {
	icecat.Catalog
	lose int
}

func (c *holdLosingCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if b, err := json.Marshal(updates); err == nil && c.lose > 0 && strings.Contains(string(b), snapshot.PropPublishHold) &&
		strings.Contains(string(b), "set-properties") {
		c.lose--
		return nil, "", fmt.Errorf("%w: table metadata-location moved underneath us", table.ErrCommitFailed)
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, updates)
}

func (c *holdLosingCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

// TestPublishHoldLostToWriterGoesOn: the commit that sets the publish's
// hold lost every one of its retries to a writer of main (one committing
// every few milliseconds, on a loaded machine), and the publish failed at
// once with "ask main's writers to hold their commits", where the hold
// was its way past such a writer. It goes on to its next attempt, which
// asks again, and publishes.
func TestPublishHoldLostToWriterGoesOn(t *testing.T) {
	cat, main, _ := rebuildBesideMain(t)
	lc := &holdLosingCatalog{Catalog: cat, lose: 10}
	br := openTestTable(t, lc, "lake.events", snapshot.OpenOptions{Branch: "rebuild"})
	checks := 0
	_, to, err := br.PublishChecked(t.Context(), "", func(context.Context, int64) error {
		if checks++; checks == 1 {
			// main moves under the first attempt: the publish asks for the hold.
			commitRecs(t, main, map[int32]mapping.Interval{0: iv(1, 2)}, testRec{0, 1, "a", "w", 0})
		}
		return nil
	})
	if err != nil {
		t.Fatalf("publish after %d checks: %v", checks, err)
	}
	if lc.lose != 0 {
		t.Fatalf("the publish asked for the hold %d times, want at least 10", 10-lc.lose)
	}
	fresh := openTestTable(t, cat, "lake.events", snapshot.OpenOptions{})
	if fresh.Head().SnapshotID != to {
		t.Fatalf("main's head is %d, want the published %d", fresh.Head().SnapshotID, to)
	}
}
