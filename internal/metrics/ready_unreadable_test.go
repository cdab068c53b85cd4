package metrics

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
)

// TestReadyzWhileLagPollCannotReadTable (from a new user's run): /readyz
// answered 200 for some 30 s after the object store went down under an
// idle sink, which touches its storage only now and then, though the lag
// poll had already logged that it could not read the table's ledger. A
// running pipeline whose last lag poll could not read its table is not
// ready (retrying, with why), /healthz still says ok, and the next poll
// that reads it makes it ready again.
func TestReadyzWhileLagPollCannotReadTable(t *testing.T) {
	e := floetest.New(t)
	e.Topic("orders", 1, nil)
	r := New()
	r.Logger = floetest.QuietLogger()
	p := r.Pipeline("orders", "lake.orders", nil)
	p.Started(mapping.Summary{})
	var down atomic.Bool
	p.FollowTable(func(context.Context) (TableView, error) {
		if down.Load() {
			return TableView{}, errors.New("object store unreachable")
		}
		return TableView{}, nil
	})
	ctx, cancel := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.WatchLag(ctx, e.Broker(), 10*time.Millisecond)
	}()
	defer func() {
		cancel()
		<-done
	}()
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				_, doc := r.Ready()
				t.Fatalf("%s: %+v", what, doc)
			}
		}
	}
	wait("ready while the table reads", func() bool { ok, _ := r.Ready(); return ok })
	down.Store(true)
	wait("not ready, naming the table's read, while the lag poll cannot read it", func() bool {
		ok, doc := r.Ready()
		return !ok && doc.Pipelines[0].State == StateRetrying && doc.Pipelines[0].Error != ""
	})
	if ok, doc := r.Health(); !ok || doc.Status != "ok" {
		t.Errorf("/healthz while the table cannot be read: %+v; want ok (liveness)", doc)
	}
	down.Store(false)
	wait("ready once the table reads again", func() bool { ok, _ := r.Ready(); return ok })
}
