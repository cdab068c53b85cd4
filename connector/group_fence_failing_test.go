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

// TestGroupMemberFencedAfterOwnFailedCommitsGivesUp (from a review): the
// group-mode twin of TestFenceAfterOwnFailedCommitsStillGivesUp. A group
// member none of whose catalog commits can land (transient, errBlip)
// shares its partition with another writer of it (a sink started outside
// the group: the operator's mistake the fence warning names). Each of its
// commits fails, and the reload of its retry finds the other writer moved
// the partition on: a fence after its own failed attempts
// (FencedError.Failed). In group mode a fence only reset the session
// (session.survive), whatever Failed said, so the session never ended and
// the member never gave up. It gives up after RetryFor, naming its own
// failure.
func TestGroupMemberFencedAfterOwnFailedCommitsGivesUp(t *testing.T) {
	e := newEnv(t)
	const topic, tableName = "zombie", "lake.zombie"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	tbl, bc := e.blipTable(tableName)
	cat, ident := e.CatalogOf(tableName)
	healthy, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	healthyDone := make(chan error, 1)
	hs, err := connector.NewSink(e.Dial(), healthy, connector.Config{Topic: topic, FlushRecords: 1_000_000, FlushInterval: 150 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := hs.Run(ctx)
		healthyDone <- err
	}()
	defer func() {
		cancel()
		<-healthyDone
	}()
	go func() {
		for ctx.Err() == nil {
			e.Produce(records(topic, 0, 10, "b"))
			time.Sleep(100 * time.Millisecond)
		}
	}()

	const retryFor = 2 * time.Second
	var fenced, retries atomic.Int64
	bc.commitsDown.Store(true)
	cfg := groupConfig(topic, "g")
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
	const within = 10 * retryFor
	select {
	case err := <-done:
		t.Logf("the failing member stopped: %v (fenced %d times, %d retries)", err, fenced.Load(), retries.Load())
		if err == nil || !strings.Contains(err.Error(), "gave up after retrying for 2s") || !errors.Is(err, errBlip) {
			t.Fatalf("the failing member stopped with %v; want it to give up after RetryFor, naming its own failure", err)
		}
	case <-time.After(within):
		t.Fatalf("a group member none of whose commits can land did not give up within %s (RetryFor %s): fenced %d times by the other writer after its own failed commits, %d retries; in group mode each such fence only reset the session",
			within, retryFor, fenced.Load(), retries.Load())
	}
}
