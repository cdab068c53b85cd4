package metrics

import (
	"errors"
	"slices"
	"testing"

	"github.com/floe-dev/floe/connector"
)

// TestUnconfirmedMemberShowsRetrying: while the group's coordinator has
// not answered a member past the session timeout (OnUnconfirmed), it shows
// no partition as its own and is not ready, though records of the
// partitions it holds still arrive (a member cut off from the
// coordinator only), and whatever else recovers meanwhile (a new
// session, the brokers accepting a connection) does not make it ready;
// the coordinator's answer does, the partitions shown again.
func TestUnconfirmedMemberShowsRetrying(t *testing.T) {
	r := New()
	p := r.Pipeline("orders", "lake.orders", nil)
	cfg := connector.Config{Group: "g"}
	p.Hook(&cfg)
	cfg.OnSession()
	cfg.OnOwned([]int32{0, 1})
	cfg.OnRecords(1)
	shown := func() (bool, string, []int32) {
		ok, doc := r.Ready()
		return ok, doc.Pipelines[0].State, r.StatusPage().Pipelines[0].Assigned
	}
	if ok, state, assigned := shown(); !ok || state != StateRunning || !slices.Equal(assigned, []int32{0, 1}) {
		t.Fatalf("before: ready %v, %s, assigned %v", ok, state, assigned)
	}
	cfg.OnUnconfirmed(errors.New("the group coordinator has not answered this member"))
	cfg.OnRecords(1)
	cfg.OnGroupDropped(errors.New("dropped"))
	cfg.OnSession()
	if ok, state, assigned := shown(); ok || state != StateRetrying || len(assigned) > 0 {
		t.Fatalf("unconfirmed, records still arriving, a session started: ready %v, %s, assigned %v; want not ready, retrying, none", ok, state, assigned)
	}
	cfg.OnUnconfirmed(nil)
	if ok, state, assigned := shown(); !ok || state != StateRunning || !slices.Equal(assigned, []int32{0, 1}) {
		t.Fatalf("once the coordinator answers: ready %v, %s, assigned %v; want ready, running, [0 1]", ok, state, assigned)
	}
}
