package connector_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestUnconfirmedAfterCutWithRequestAhead (from a review): a KIP-848
// member's heartbeat is written to the coordinator's connection behind
// another request still awaiting its answer (the offset mirror's
// OffsetCommit, which the same client sends on the same connection), and
// the brokers then refuse the member's connections for longer than the
// group's session timeout. franz-go ends the heartbeat queued behind the
// dead read with OnBrokerE2E's WriteErr set (errChosenBrokerDead), though
// OnBrokerWrite had reported it written: groupContact counted it awaited
// and, skipping ends with a WriteErr, never uncounted it, so the silence
// stayed zero and the member was never reported unconfirmed; it claimed
// its partitions for as long as the cut lasted (and any later spell of
// that session).
//
// The subtest "nothing ahead" is the same cut with no request held.
func TestUnconfirmedAfterCutWithRequestAhead(t *testing.T) {
	t.Run("nothing ahead", func(t *testing.T) { cutWithRequestAhead(t, false) })
	t.Run("commit ahead", func(t *testing.T) { cutWithRequestAhead(t, true) })
}

func cutWithRequestAhead(t *testing.T, hold bool) {
	stack, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(),
		Kfake: []kfake.Opt{kfake.BrokerConfigs(map[string]string{
			"group.consumer.session.timeout.ms":    "6000",
			"group.consumer.heartbeat.interval.ms": "1000",
		})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	e := &env{Env: &floetest.Env{T: t, Ctx: t.Context(), Stack: stack}}
	const topic, table, group = "s57-contact", "lake.s57_contact", "floe-s57-contact"
	e.Topic(topic, 2, nil)

	var (
		mu      sync.Mutex
		reports []error
	)
	cfg := groupConfig(topic, group)
	cfg.GroupProtocol = connector.GroupConsumer
	cfg.OnUnconfirmed = func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, err)
	}
	unconfirmed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reports) > 0 && reports[len(reports)-1] != nil
	}
	var owned atomic.Int64
	cfg.OnOwned = func(p []int32) { owned.Store(int64(len(p))) }

	d, done, stop := runBehindCut(t, e, e.Table(table), cfg)
	defer func() {
		stop()
		<-done
	}()
	e.Produce(records(topic, 0, 5, "before"))
	e.Produce(records(topic, 1, 5, "before"))
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
	waitFor(t, 30*time.Second, "the member to own both partitions", func() bool { return owned.Load() == 2 })

	// The next OffsetCommit is held by the broker: every request the
	// member writes on that connection after it waits behind it.
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	held := make(chan struct{})
	var holding atomic.Bool
	stack.Cluster.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		if holding.CompareAndSwap(false, true) {
			close(held)
			if hold {
				stack.Cluster.SleepControl(func() { <-release })
			}
		}
		return nil, nil, false
	})
	e.Produce(records(topic, 0, 5, "held"))
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no OffsetCommit came")
	}
	// A heartbeat (every second) is written behind it.
	time.Sleep(2500 * time.Millisecond)
	d.setCut(true)
	free()
	// The group's session timeout is 6s: the coordinator has not answered
	// for longer by now.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && !unconfirmed() {
		time.Sleep(200 * time.Millisecond)
	}
	if !unconfirmed() {
		t.Errorf("the member, cut off from its brokers for 20s (the group's session timeout is 6s), was never reported unconfirmed (reports %v); it still says it owns %d partitions",
			reports, owned.Load())
	}
	d.setCut(false)
}
