package connector_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/metrics"
	"github.com/floe-dev/floe/internal/statuspage"
)

// TestConsumerProtocolMemberBackBeforeSessionRunsAgain: a KIP-848 member
// whose brokers refuse its connections for longer than its own
// --session-timeout (6s) but less than the group's (the brokers' 45s)
// keeps its partitions: the group never dropped it. Once they answer
// again it sinks as before, and its /healthz state must say running with
// its partitions, not retrying, on a topic that gets no new record (a
// review's suspicion, not seen: a guard for the coordinator watch, which
// must time KIP-848 members by the group's session timeout).
func TestConsumerProtocolMemberBackBeforeSessionRunsAgain(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "back-848", "lake.back_848", "floe-back-848"
	e.Topic(topic, 2, nil)
	reg := metrics.New()
	cfg := groupConfig(topic, group)
	cfg.GroupProtocol = connector.GroupConsumer
	reg.Pipeline(topic, table, nil).Hook(&cfg)
	d, done, stop := runBehindCut(t, e, e.Table(table), cfg)
	for p := range int32(2) {
		e.Produce(records(topic, p, 5, "before"))
	}
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
	state := func() statuspage.Pipeline { return reg.StatusPage().Pipelines[0] }
	waitFor(t, 30*time.Second, "the member to run with both partitions", func() bool {
		return len(state().Assigned) == 2 && state().State == metrics.StateRunning
	})

	cutFor := 10 * time.Second
	d.setCut(true)
	var seen []string
	for end := time.Now().Add(cutFor); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if st := state(); st.State != metrics.StateRunning && !slices.Contains(seen, st.State+": "+st.Error) {
			seen = append(seen, st.State+": "+st.Error)
		}
	}
	d.setCut(false)
	time.Sleep(6 * time.Second)
	if st := state(); st.State != metrics.StateRunning || len(st.Assigned) != 2 {
		t.Fatalf("6s after the brokers answered again (cut for %s, session timeout 45s), the member says %s (%s), assigned %v; states seen during the cut: %q",
			cutFor, st.State, st.Error, st.Assigned, seen)
	}
	for _, st := range seen {
		if strings.Contains(st, "coordinator has not answered") {
			t.Errorf("during a cut shorter than the group's session timeout, the member said %q: the group had not dropped it", st)
		}
	}
	for p := range int32(2) {
		e.Produce(records(topic, p, 5, "after"))
	}
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 30*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("member: %v", err)
	}
	checkExactlyOnce(t, e.Table(table), want)
}
