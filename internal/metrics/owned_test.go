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

// TestLostPartitionsAssignedZero: a member that loses partitions before
// its ledger or a lag poll named them (a group member of a new table, or
// one whose first records went to another member) kept
// floe_partition_assigned at 1 for them: only the partitions it showed
// were set again (found by a flaky group test).
func TestLostPartitionsAssignedZero(t *testing.T) {
	r := New()
	p := r.Pipeline("orders", "lake.orders", nil)
	cfg := connector.Config{Group: "g"}
	p.Hook(&cfg)
	cfg.OnOwned([]int32{2, 3})
	cfg.OnOwned(nil)
	mfs, err := r.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "floe_partition_assigned" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() != 0 {
				t.Errorf("floe_partition_assigned %v is %v after the partitions were lost, want 0", m.GetLabel(), m.GetGauge().GetValue())
			}
		}
	}
}
