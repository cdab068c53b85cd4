package metrics

import (
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floe-dev/floe/connector"
)

// newAssigned is floe_partition_assigned: which partitions a member of a
// consumer group sinks now. Every member showed every partition at the
// table's offsets, and only a log line said which were its own (found by
// an operator).
func newAssigned() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "floe", Name: "partition_assigned",
		Help: "1 for a partition this process sinks now, 0 for one it shows but does not sink: in a consumer group (--group), those the group assigned to this member; otherwise every partition it sinks (all, or --partitions)."},
		[]string{"topic", "partition", "table"})
}

// hookOwned follows, in group mode, the partitions the group assigns to
// this member (connector.Config.OnOwned).
func (p *Pipeline) hookOwned(cfg *connector.Config) {
	p.mu.Lock()
	p.group = cfg.Group
	p.mu.Unlock()
	onOwned := cfg.OnOwned
	cfg.OnOwned = func(partitions []int32) {
		p.mu.Lock()
		lost := p.owned
		p.owned = map[int32]bool{}
		gained := false
		for _, part := range partitions {
			p.owned[part] = true
			gained = gained || !lost[part]
		}
		// Every partition shown gets its 0 or 1 now, not at the next
		// lag poll; so do those it lost, which a pipeline whose ledger
		// and lag poll have not named them yet does not show otherwise
		// (their gauges stayed 1).
		for part := range lost {
			p.setAssigned(part)
		}
		p.setAllAssigned()
		p.mu.Unlock()
		if gained {
			// The partitions come at the ledger's next offsets, which the
			// member that gave them up may just have moved: poll now, as
			// after a commit, not at the next --lag-interval (a new owner
			// showed its last poll's lag for them: from a new user).
			p.pollSoon()
		}
		if onOwned != nil {
			onOwned(partitions)
		}
	}
	onUnconfirmed := cfg.OnUnconfirmed
	cfg.OnUnconfirmed = func(err error) {
		p.mu.Lock()
		p.unconfirmed = ""
		if err != nil {
			p.unconfirmed = err.Error()
		}
		p.setAllAssigned()
		p.mu.Unlock()
		if onUnconfirmed != nil {
			onUnconfirmed(err)
		}
	}
}

// shownState is the state and error /healthz, /readyz and the status page
// show. While the group's coordinator has not confirmed the member's
// partitions (OnUnconfirmed), a running member shows retrying with why:
// it is not ready, though it may still read and commit records of the
// partitions it holds (which set running), and the recovery of whatever
// else made it retry meanwhile does not hide it. So does a running
// pipeline whose last lag poll could not read its table: an idle sink has
// nothing to commit, and its own reads of the ledger pass over a failure,
// so it learns of a storage outage late. The caller holds p.mu.
func (p *Pipeline) shownState() (state, err string) {
	switch {
	case p.unconfirmed != "" && (p.state == StateRunning || p.state == StateStarting):
		return StateRetrying, p.unconfirmed
	case p.unreadable != "" && p.state == StateRunning:
		return StateRetrying, p.unreadable
	}
	return p.state, p.err
}

// setAllAssigned sets floe_partition_assigned of every partition shown.
// The caller holds p.mu.
func (p *Pipeline) setAllAssigned() {
	for part := range p.next {
		p.setAssigned(part)
	}
	for part := range p.offsets {
		p.setAssigned(part)
	}
	for part := range p.owned {
		p.setAssigned(part)
	}
}

// assigned reports whether this process sinks partition part now: in a
// group, one the group assigned to it, unless the group's coordinator has
// not confirmed the membership for longer than the session timeout. The
// caller holds p.mu.
func (p *Pipeline) assigned(part int32) bool {
	if p.group != "" {
		return p.unconfirmed == "" && p.owned[part]
	}
	return p.partitions == nil || slices.Contains(p.partitions, part)
}

// setAssigned sets floe_partition_assigned of partition part. The caller
// holds p.mu.
func (p *Pipeline) setAssigned(part int32) {
	v := 0.0
	if p.assigned(part) {
		v = 1
	}
	p.r.assigned.With(prometheus.Labels{"topic": p.topic, "partition": strconv.Itoa(int(part)), "table": p.table}).Set(v)
}

// ownedList is the status page's Assigned: in group mode the partitions
// the group assigned to this member, sorted; none while the membership is
// unconfirmed. The caller holds p.mu.
func (p *Pipeline) ownedList() []int32 {
	if p.unconfirmed != "" {
		return nil
	}
	return slices.Sorted(maps.Keys(p.owned))
}
