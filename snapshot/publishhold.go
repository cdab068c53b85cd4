package snapshot

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// PropPublishHold is the table property by which a publish asks main's
// writers to hold their commits while it checks main and swaps it. A
// publish (PublishChecked) sets it once main moved under one of its
// attempts: a sink that commits more often than the check takes would
// otherwise win every race. Its value is "BRANCH UNTIL", UNTIL in Unix
// milliseconds. The swap's commit removes it, and so does a publish that
// gives up; one left behind by a publisher that died ends at UNTIL.
const PropPublishHold = "floe.publish-hold"

// maxPublishHold bounds how long a writer holds for one hold, whatever its
// UNTIL says: another host's clock running ahead, or a publish that died,
// cannot stop main's writers for longer.
const maxPublishHold = 10 * time.Minute

// publishHoldPoll is how often a held writer reloads the table to see
// whether the hold was lifted.
const publishHoldPoll = 250 * time.Millisecond

// PublishHold is a publish's request to main's writers (PropPublishHold).
type PublishHold struct {
	// Branch is the branch being published.
	Branch string
	// Until is when the hold ends at the latest.
	Until time.Time
}

// heldState is what a writer remembers of the hold it last saw: when it
// first saw that value, from which maxPublishHold counts.
type heldState struct {
	value string
	since time.Time
}

// parsePublishHold reads a PropPublishHold value.
func parsePublishHold(v string) (PublishHold, bool) {
	branch, until, ok := strings.Cut(v, " ")
	ms, err := strconv.ParseInt(until, 10, 64)
	if !ok || err != nil || branch == "" {
		return PublishHold{}, false
	}
	return PublishHold{Branch: branch, Until: time.UnixMilli(ms)}, true
}

func (h PublishHold) value() string {
	return fmt.Sprintf("%s %d", h.Branch, h.Until.UnixMilli())
}

// PublishHold returns the hold a publish set on main's writers, as the
// table was last loaded, when the Table is open on main and the hold has
// not ended. A writer's own commits bring the table's properties as the
// catalog has them, so a writer of main sees a hold at the latest in the
// answer to its next commit.
func (t *Table) PublishHold() (PublishHold, bool) {
	if t.branch != table.MainBranch {
		return PublishHold{}, false
	}
	v := t.tbl.Properties()[PropPublishHold]
	h, ok := parsePublishHold(v)
	if !ok {
		return PublishHold{}, false
	}
	now := time.Now()
	if t.held.value != v {
		t.held = heldState{value: v, since: now}
	}
	if end := t.held.since.Add(maxPublishHold); h.Until.After(end) {
		h.Until = end
	}
	return h, now.Before(h.Until)
}

// AwaitPublish holds a writer of main while a publish asks it to
// (PublishHold): it reloads the table every publishHoldPoll until the hold
// is lifted or ends, or ctx ends, and returns how long it held (zero when
// there was no hold). A reload that fails is logged and tried again: the
// hold only delays the writer's commit, which reloads on its own.
func (t *Table) AwaitPublish(ctx context.Context, log *slog.Logger) time.Duration {
	h, ok := t.PublishHold()
	if !ok {
		return 0
	}
	start := time.Now()
	log.Info(fmt.Sprintf("holding this commit: a replay is publishing branch %s as main of %s and asked main's writers to wait until it has swapped them (at most until %s); the commit follows then",
		h.Branch, t.Name(), h.Until.UTC().Format(time.RFC3339)), "branch", h.Branch)
	for ok {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-time.After(min(publishHoldPoll, time.Until(h.Until))):
		}
		if err := t.Refresh(ctx); err != nil && ctx.Err() == nil {
			log.Debug("could not reload the table while holding for a publish", "err", err)
		}
		h, ok = t.PublishHold()
	}
	held := time.Since(start)
	log.Info("the publish's hold ended: committing", "held", held.Round(time.Millisecond))
	return held
}

// setPublishHold sets a hold on main's writers for branch, ending after
// d, and returns it.
func (t *Table) setPublishHold(ctx context.Context, d time.Duration) (PublishHold, error) {
	h := PublishHold{Branch: t.branch, Until: time.Now().Add(d)}
	if err := t.SetProperties(ctx, map[string]string{PropPublishHold: h.value()}); err != nil {
		return PublishHold{}, fmt.Errorf("ask main's writers to hold their commits while publishing %s: %w", t.branch, err)
	}
	return h, nil
}

// liftPublishHold removes the hold a publish that gives up set, if it is
// still the table's: main's writers commit again at once rather than when
// it ends.
func (t *Table) liftPublishHold(ctx context.Context, log *slog.Logger, h PublishHold) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := retryConflicts(ctx, func(attempt int) error {
		if err := t.Refresh(ctx); err != nil {
			return err
		}
		if t.tbl.Properties()[PropPublishHold] != h.value() {
			return nil
		}
		txn := t.tbl.NewTransaction()
		if err := txn.RemoveProperties([]string{PropPublishHold}); err != nil {
			return err
		}
		tbl, err := txn.Commit(ctx)
		if err != nil {
			return err
		}
		return t.adoptCommitted(ctx, tbl)
	})
	if err != nil {
		log.Warn("could not lift the hold on main's writers; they commit again once it ends", "until", h.Until.UTC().Format(time.RFC3339), "err", err)
	}
}

// publishHoldFor is how long a publish asks main's writers to hold: long
// enough for two more of its attempts, each as long as the last one took.
func publishHoldFor(attempt time.Duration) time.Duration {
	return min(max(2*attempt+15*time.Second, 30*time.Second), maxPublishHold)
}
