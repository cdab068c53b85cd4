package connector_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// errBlip is the transient error blipCatalog injects.
var errBlip = fmt.Errorf("injected: %w", catalog.ErrCatalogUnreachable)

// blipCatalog is a faultCatalog whose loads and commits of its table fail
// with a transient error (the catalog unreachable) while down is set, and
// its commits only while commitsDown is: outages that the real SQLite
// catalog cannot be made to have on cue.
type blipCatalog struct {
	*faultCatalog
	down, commitsDown atomic.Bool
}

func (c *blipCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if c.down.Load() && slices.Equal(ident, c.ident) {
		return nil, errBlip
	}
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(ident, tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c *blipCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, upds []table.Update) (table.Metadata, string, error) {
	if (c.down.Load() || c.commitsDown.Load()) && slices.Equal(ident, c.ident) {
		return nil, "", errBlip
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, upds)
}

// blipTable opens (creating) the raw table name through a blipCatalog.
func (e *env) blipTable(name string) (*snapshot.Table, *blipCatalog) {
	e.T.Helper()
	bc := &blipCatalog{faultCatalog: e.newFaultCatalog(name)}
	tbl, err := snapshot.Open(e.Ctx, bc, bc.ident, snapshot.OpenOptions{Create: true})
	if err != nil {
		e.T.Fatal(err)
	}
	return tbl, bc
}

// retryLog records a sink's retries (Config.OnRetry) and session starts
// (Config.OnSession), and when each came.
type retryLog struct {
	mu       sync.Mutex
	waits    []time.Duration
	firstErr time.Time
	started  []time.Time
}

func (l *retryLog) retried(wait time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstErr.IsZero() {
		l.firstErr = time.Now()
	}
	l.waits = append(l.waits, wait)
	return len(l.waits)
}

func (l *retryLog) session() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = append(l.started, time.Now())
}

func (l *retryLog) snapshot() (waits []time.Duration, firstErr time.Time, started []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.waits), l.firstErr, slices.Clone(l.started)
}

// TestRetryForCountsFromAHealthyQuietSession: Config.RetryFor is how long
// the sink keeps failing, not the time since its last commit. A live sink
// of a quiet topic fails three sessions in a row at their start (the
// catalog away), then runs healthily with nothing to commit for longer
// than RetryFor; a record comes and its commit meets the catalog away
// again. The sink retries it with the backoff begun afresh and sinks the
// record. It gave up at once ("gave up after retrying for 3s without a
// commit"): failingSince and the backoff were reset only by a commit, so
// a sink of an idle topic stopped on one blip.
// "group" is a member of a consumer group, whose session is healthy once
// it has taken on the partitions the group assigned.
func TestRetryForCountsFromAHealthyQuietSession(t *testing.T) {
	for _, group := range []string{"", "floe-quiet"} {
		t.Run(cmp.Or(group, "single"), func(t *testing.T) { testRetryForQuiet(t, group) })
	}
}

func testRetryForQuiet(t *testing.T, group string) {
	e := newEnv(t)
	const topic, tableName = "quiet", "lake.quiet"
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 5, "a"))
	tbl, bc := e.blipTable(tableName)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}

	const retryFor, startFailures = 3 * time.Second, 3
	var rl retryLog
	cfg := connector.Config{Topic: topic, Group: group, RetryFor: retryFor, FlushInterval: 100 * time.Millisecond, Logger: quietLogger(),
		OnRetry: func(_ error, wait time.Duration) {
			// The catalog comes back after the first sessions failed,
			// and after the blip's first retry.
			if rl.retried(wait) >= startFailures {
				bc.down.Store(false)
			}
		},
		OnSession: rl.session}
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	bc.down.Store(true)
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx)
		done <- err
	}()
	ran := func() {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("the sink stopped: %v", err)
		default:
		}
	}
	waitFor(t, 20*time.Second, "the sink running after its failed starts", func() bool {
		ran()
		_, _, started := rl.snapshot()
		return len(started) > 0
	})
	waits, firstErr, started := rl.snapshot()
	if len(waits) != startFailures {
		t.Fatalf("%d retries before the session that started, want %d", len(waits), startFailures)
	}
	// Idle and healthy past RetryFor since the first failure, and for
	// more than one of the session's checks (every 2 s).
	idle := max(time.Until(firstErr.Add(retryFor+time.Second)), time.Until(started[0].Add(4*time.Second)))
	t.Logf("waits %v; the session started %s after the first failure; idle for %s", waits,
		started[0].Sub(firstErr).Round(time.Millisecond), idle.Round(time.Millisecond))
	time.Sleep(idle)
	ran()

	bc.down.Store(true)
	e.Produce(records(topic, 0, 1, "b"))
	waitFor(t, 20*time.Second, "the record committed after the blip", func() bool {
		select {
		case err := <-done:
			t.Fatalf("the sink stopped on one transient error, %s after its healthy session started: %v",
				time.Since(started[0]).Round(time.Millisecond), err)
		default:
		}
		// A handle of its own: the sink's table is the sink's (a shared
		// one raced with it: found by review under -race).
		seen, err := snapshot.Open(e.Ctx, bc, bc.ident, snapshot.OpenOptions{})
		if err != nil {
			return false
		}
		return mustLedger(t, seen).Next()[tp] == 6
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waits, _, _ = rl.snapshot()
	// The blip's retry waits the first interval (250 ms, ±50%), not the
	// one grown by the failed starts (0.84 s, ±50%).
	if len(waits) <= startFailures || waits[startFailures] > 375*time.Millisecond {
		t.Errorf("retries waited %v: want the blip's wait (after %d) begun afresh, at most 375ms", waits, startFailures)
	}
	checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{tp: 6})
}

// TestRetryForGivesUpOnFlushesThatKeepFailing: a session that starts
// and reads records, but whose every flush fails, is not healthy however
// long it runs before the flush (here longer than the session's checks):
// the sink gives up after RetryFor; a group member too.
func TestRetryForGivesUpOnFlushesThatKeepFailing(t *testing.T) {
	for _, group := range []string{"", "floe-stuck"} {
		t.Run(cmp.Or(group, "single"), func(t *testing.T) { testRetryForStuck(t, group) })
	}
}

func testRetryForStuck(t *testing.T, group string) {
	e := newEnv(t)
	const topic, tableName = "stuck", "lake.stuck"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 5, "a"))
	tbl, bc := e.blipTable(tableName)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 5, "b"))
	const retryFor = 2 * time.Second
	var rl retryLog
	cfg := connector.Config{Topic: topic, Group: group, RetryFor: retryFor, FlushInterval: 3 * time.Second, Logger: quietLogger(),
		OnRetry: func(_ error, wait time.Duration) { rl.retried(wait) }, OnSession: rl.session}
	// Every commit fails; the sessions' loads of the table pass.
	bc.commitsDown.Store(true)
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.Ctx, time.Minute)
	defer cancel()
	_, err = s.Run(ctx)
	waits, firstErr, started := rl.snapshot()
	t.Logf("%d sessions, retries waited %v, stopped %s after the first failure: %v", len(started), waits,
		time.Since(firstErr).Round(time.Millisecond), err)
	if ctx.Err() != nil {
		t.Fatal("the sink whose every flush fails still ran after a minute")
	}
	if err == nil || !strings.Contains(err.Error(), "gave up after") || len(waits) == 0 {
		t.Fatalf("Run returned %v after %d retries, want it to give up after retrying for %s", err, len(waits), retryFor)
	}
}
