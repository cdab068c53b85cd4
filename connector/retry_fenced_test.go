package connector_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// turnHook is a CommitTurn that runs before once, on the first commit
// after armed is set: what another writer does while this one's flush is
// on its way to the catalog.
type turnHook struct {
	sync.Mutex
	armed  atomic.Bool
	before func()
}

func (h *turnHook) Lock() {
	if h.armed.CompareAndSwap(true, false) {
		h.before()
	}
	h.Mutex.Lock()
}

// cancelCatalog is a blipCatalog whose next load of its table, once
// cancelNext is set, cancels the sink's context and fails as the
// cancellation makes it: an interrupt that lands while a session starts.
type cancelCatalog struct {
	*blipCatalog
	cancelNext atomic.Bool
	cancel     context.CancelFunc
}

func (c *cancelCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if slices.Equal(ident, c.ident) && c.cancelNext.CompareAndSwap(true, false) {
		c.cancel()
		return nil, ctx.Err()
	}
	return c.blipCatalog.LoadTable(ctx, ident)
}

// TestFencedSessionEndsARunOfFailures: a session fenced by another writer
// of its partitions got as far as committing, which a session that keeps
// failing does not: the failures before it no longer count. Two sinks of
// the same partition (outside a group), the first meets a transient
// failure, then is fenced by the second after longer than RetryFor.
// "blip": a transient failure right after the fence is retried; it gave
// up at once ("gave up after retrying for 2s"), the clock still running
// from the failure before the fence. "interrupt": an interrupt while the
// session after the fence starts is a clean stop; it returned "interrupted
// while starting again after a failure" and floe sink exited 2 (seen in
// TestDeadLettersUnderCatalogAndStorageFaults, whose members are stopped
// with SIGINT once the backlog is sunk).
func TestFencedSessionEndsARunOfFailures(t *testing.T) {
	for _, after := range []string{"blip", "interrupt"} {
		t.Run(after, func(t *testing.T) { testFencedAfterFailure(t, after) })
	}
}

func testFencedAfterFailure(t *testing.T, after string) {
	e := newEnv(t)
	const topic, tableName = "fenced", "lake.fenced"
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 5, "a"))
	tbl, bc := e.blipTable(tableName)
	cc := &cancelCatalog{blipCatalog: bc}
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	cc.cancel = cancel
	tbl, err := snapshot.Open(e.Ctx, cc, bc.ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}

	const retryFor = 2 * time.Second
	var (
		rl       retryLog
		fenced   atomic.Int64
		otherErr error
	)
	turn := &turnHook{before: func() {
		// Past RetryFor since the failure, the other writer commits the
		// records this flush holds.
		_, firstErr, _ := rl.snapshot()
		time.Sleep(time.Until(firstErr.Add(retryFor + 500*time.Millisecond)))
		other, err := snapshot.Open(e.Ctx, bc, bc.ident, snapshot.OpenOptions{})
		if err == nil {
			_, err = e.sink(other, connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger()})
		}
		otherErr = err
	}}
	cfg := connector.Config{Topic: topic, RetryFor: retryFor, FlushRecords: 5, Logger: quietLogger(), CommitTurn: turn,
		OnRetry: func(_ error, wait time.Duration) {
			switch rl.retried(wait) {
			case 1:
				// The failed commit: the next session's flush meets the
				// other writer.
				bc.commitsDown.Store(false)
				turn.armed.Store(true)
			case 2:
				bc.down.Store(false)
			}
		},
		OnFenced: func(error) {
			fenced.Add(1)
			if after == "blip" {
				bc.down.Store(true)
			} else {
				cc.cancelNext.Store(true)
			}
		}}
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	bc.commitsDown.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx)
		done <- err
	}()
	if after == "interrupt" {
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the sink did not stop within 30 s")
		}
		if otherErr != nil {
			t.Fatalf("the other writer: %v", otherErr)
		}
		if fenced.Load() != 1 {
			t.Fatalf("fenced %d times, want once (Run returned %v)", fenced.Load(), err)
		}
		if err != nil {
			t.Fatalf("interrupted while its session started after a fence, Run returned %v; want a clean stop", err)
		}
		checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{tp: 5})
		return
	}
	waitFor(t, 30*time.Second, "the sink retrying the blip after the fence", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the sink stopped (fenced %d times): %v", fenced.Load(), err)
		default:
		}
		waits, _, _ := rl.snapshot()
		return len(waits) >= 2 && !bc.down.Load()
	})
	if otherErr != nil {
		t.Fatalf("the other writer: %v", otherErr)
	}
	e.Produce(records(topic, 0, 5, "b"))
	waitFor(t, 30*time.Second, "the next records committed", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the sink stopped: %v", err)
		default:
		}
		seen, err := snapshot.Open(e.Ctx, bc, bc.ident, snapshot.OpenOptions{})
		return err == nil && mustLedger(t, seen).Next()[tp] == 10
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{tp: 10})
}
