package connector_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// TestFenceAfterOwnFailedCommitsStillGivesUp (from a review): a sink
// whose every catalog commit fails (transient, errBlip) shares its
// partition with a healthy writer. The failing sink writes its files, its
// commit fails, and the reload of its retry finds that the other writer
// moved the partition on: a fence, which the sink counted as no failure
// at all (with the other writer committing every 150 ms it never gave
// up), and then as the end of a run of failures (every 1.2 s it gave up
// after 11 s instead of 3.5-5). A fence met after the sink's own failed
// attempts (snapshot.FencedError.Failed) is a failure: it gives up after
// RetryFor, naming its own error.
func TestFenceAfterOwnFailedCommitsStillGivesUp(t *testing.T) {
	for _, every := range []time.Duration{150 * time.Millisecond, 1200 * time.Millisecond} {
		t.Run(every.String(), func(t *testing.T) { testFenceAfterOwnFailures(t, every, "") })
	}
}

// TestGroupMemberFencedAfterOwnFailedCommitsGivesUp (from a review): the
// group-mode twin of TestFenceAfterOwnFailedCommitsStillGivesUp, the
// failing sink a group member (the other writer a sink started outside
// the group: the operator's mistake the fence warning names). In group
// mode a fence only reset the session (session.survive), whatever
// FencedError.Failed said, so the session never ended and the member
// never gave up.
func TestGroupMemberFencedAfterOwnFailedCommitsGivesUp(t *testing.T) {
	testFenceAfterOwnFailures(t, 150*time.Millisecond, "g")
}

func testFenceAfterOwnFailures(t *testing.T, every time.Duration, group string) {
	e := newEnv(t)
	const topic, tableName = "zombie", "lake.zombie"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	tbl, bc := e.blipTable(tableName)
	// The healthy writer, over the catalog itself.
	cat, ident := e.CatalogOf(tableName)
	healthy, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	healthyDone := make(chan error, 1)
	hs, err := connector.NewSink(e.Dial(), healthy, connector.Config{Topic: topic, FlushRecords: 1_000_000, FlushInterval: every, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var healthyCommits atomic.Int64
	go func() {
		st, err := hs.Run(ctx)
		healthyCommits.Store(int64(st.Commits))
		healthyDone <- err
	}()
	defer func() {
		cancel()
		<-healthyDone
		t.Logf("the healthy writer committed %d times", healthyCommits.Load())
	}()
	// A producer keeps records coming, so that the healthy writer commits
	// every flush interval. The test waits for it to end: a Produce
	// failing after the test returned panicked the package's run.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for ctx.Err() == nil {
			e.Produce(records(topic, 0, 10, "b"))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	defer func() {
		cancel()
		<-produced
	}()

	const retryFor = 2 * time.Second
	var fenced, retries atomic.Int64
	bc.commitsDown.Store(true) // every commit of the failing sink fails
	cfg := connector.Config{Topic: topic, Logger: quietLogger()}
	if group != "" {
		cfg = groupConfig(topic, group)
	}
	cfg.RetryFor, cfg.FlushRecords, cfg.FlushInterval = retryFor, 20, 150*time.Millisecond
	cfg.OnFenced = func(error) { fenced.Add(1) }
	cfg.OnRetry = func(error, time.Duration) { retries.Add(1) }
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		st, err := s.Run(ctx)
		if err == nil && st.Commits > 0 {
			err = errors.New("committed")
		}
		done <- err
	}()
	const within = 6 * retryFor
	select {
	case err := <-done:
		t.Logf("the failing sink stopped: %v (fenced %d times, %d retries)", err, fenced.Load(), retries.Load())
		if err == nil || !strings.Contains(err.Error(), "gave up after retrying for 2s") || !errors.Is(err, errBlip) {
			t.Fatalf("the failing sink stopped with %v; want it to give up after RetryFor, naming its own failure", err)
		}
	case <-time.After(within):
		t.Fatalf("a sink none of whose commits can land did not give up within %s (RetryFor %s): fenced %d times by the other writer after its own failed commits, %d retries; each fence reset the --retry-for clock",
			within, retryFor, fenced.Load(), retries.Load())
	}
}
