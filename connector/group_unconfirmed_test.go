package connector_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/internal/metrics"
	"github.com/floe-dev/floe/internal/statuspage"
	"github.com/floe-dev/floe/localstack"
)

// TestGroupMemberCutOffPastSessionStopsClaiming (s55's review, group
// ownership reporting): the brokers refuse a member's connections for
// longer than the group's session timeout, and the group gives its
// partitions to the other member, which sinks them. The cut-off member
// said they were its own (/status.json's assigned, floe_partition_assigned
// at 1) and running for as long as franz-go had not called a loss, so two
// members claimed the same partitions. Once the brokers answer again, the
// member must rejoin and report what the group gives it.
func TestGroupMemberCutOffPastSessionStopsClaiming(t *testing.T) {
	for _, protocol := range []connector.GroupProtocol{connector.GroupClassic, connector.GroupConsumer} {
		t.Run(string(protocol), func(t *testing.T) { cutOffPastSession(t, protocol) })
	}
}

func cutOffPastSession(t *testing.T, protocol connector.GroupProtocol) {
	// KIP-848's session timeout is the brokers' (45s by default), not the
	// member's: 6s here, and the members' own say 20s, which the group
	// does not use.
	stack, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(),
		Kfake: []kfake.Opt{kfake.BrokerConfigs(map[string]string{"group.consumer.session.timeout.ms": "6000"})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	e := &env{Env: &floetest.Env{T: t, Ctx: t.Context(), Stack: stack}}
	topic, table, group := "cutoff-"+string(protocol), "lake.cutoff_"+string(protocol), "floe-cutoff-"+string(protocol)
	const parts = 4
	e.Topic(topic, parts, nil)
	reg := metrics.New()
	cfg := func(name string) connector.Config {
		c := groupConfig(topic, group)
		c.GroupProtocol = protocol
		if protocol == connector.GroupConsumer {
			c.SessionTimeout = 20 * time.Second
		}
		reg.Pipeline(topic, name, nil).Hook(&c)
		return c
	}
	status := func(name string) statuspage.Pipeline {
		for _, p := range reg.StatusPage().Pipelines {
			if p.Table == name {
				return p
			}
		}
		t.Fatalf("no pipeline %s", name)
		return statuspage.Pipeline{}
	}

	d, done, stop := runBehindCut(t, e, e.Table(table), cfg("a"))
	memberB := e.startMember(table, cfg("b"))
	for p := range int32(parts) {
		e.Produce(records(topic, p, 5, "before"))
	}
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
	waitFor(t, 30*time.Second, "the group to split the partitions between A and B", func() bool {
		return len(status("a").Assigned) == parts/2 && len(status("b").Assigned) == parts/2
	})

	d.setCut(true)
	waitFor(t, 40*time.Second, "B to take every partition", func() bool { return len(status("b").Assigned) == parts })
	for p := range int32(parts) {
		e.Produce(records(topic, p, 5, "cut"))
	}
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
	for range 6 {
		a, ofB := status("a"), status("b").Assigned
		gauges := assignedGauges(t, reg, "a")
		if shared := slices.DeleteFunc(slices.Clone(a.Assigned), func(p int32) bool { return !slices.Contains(ofB, p) }); len(shared) > 0 || len(gauges) > 0 {
			t.Fatalf("A, cut off past the session timeout, says it is assigned %v (floe_partition_assigned 1 for %v, state %s), which the group gave B (%v), which sank them",
				a.Assigned, gauges, a.State, ofB)
		}
		if ok, doc := reg.Ready(); ok {
			t.Fatalf("ready while A is cut off from its group: %+v", doc)
		}
		time.Sleep(500 * time.Millisecond)
	}

	d.setCut(false)
	// Starting is a member that has had no record yet (the group may have
	// given every record to B before the cut): not retrying is what counts.
	rejoined := func() bool {
		a := status("a")
		return len(a.Assigned) > 0 && (a.State == metrics.StateRunning || a.State == metrics.StateStarting) && len(assignedGauges(t, reg, "a")) == len(a.Assigned)
	}
	for deadline := time.Now().Add(90 * time.Second); !rejoined(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			a, b := status("a"), status("b")
			t.Fatalf("A did not rejoin and get partitions again within 90s: A %s (%s) assigned %v, gauges %v; B %s assigned %v",
				a.State, a.Error, a.Assigned, assignedGauges(t, reg, "a"), b.State, b.Assigned)
		}
	}
	for p := range int32(parts) {
		e.Produce(records(topic, p, 5, "after"))
	}
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 60*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("member A: %v", err)
	}
	memberB.halt(t)
	checkExactlyOnce(t, e.Table(table), want)
}

// assignedGauges lists the partitions whose floe_partition_assigned of
// table is 1.
func assignedGauges(t *testing.T, reg *metrics.Registry, table string) []string {
	t.Helper()
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "floe_partition_assigned" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["table"] == table && m.GetGauge().GetValue() == 1 {
				out = append(out, fmt.Sprint(labels["partition"]))
			}
		}
	}
	return out
}
