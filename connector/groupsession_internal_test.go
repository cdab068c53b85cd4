package connector

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupSessionTimeoutOfTheCoordinator (from a review): a KIP-848
// group's session timeout set in the brokers' server.properties (static,
// 60s here) was read as Kafka's default, 45s: the member described the
// cluster-wide broker resource (no name), which Kafka answers with the
// dynamic defaults only, so a member cut off between 45s and 60s was
// reported unconfirmed while the group still kept it. It must describe
// its coordinator by node id, and read the value once for the Sink's
// lifetime. kfake answers both broker resources alike (its BrokerConfigs
// are dynamic), so a control answers them as Kafka does.
func TestGroupSessionTimeoutOfTheCoordinator(t *testing.T) {
	c := newSessionCluster(t)
	var described atomic.Int32
	c.ControlKey(int16(kmsg.DescribeConfigs), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		described.Add(1)
		req := kr.(*kmsg.DescribeConfigsRequest)
		if len(req.Resources) != 1 || req.Resources[0].ResourceType != kmsg.ConfigResourceTypeBroker {
			return nil, nil, false // the group's: none set, kfake answers without a value
		}
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, req.Resources[0].ResourceName
		if res.ResourceName == strconv.Itoa(int(c.CurrentNode())) {
			conf := kmsg.NewDescribeConfigsResponseResourceConfig()
			conf.Name, conf.Value, conf.Source = "group.consumer.session.timeout.ms", kmsg.StringPtr("60000"), kmsg.ConfigSourceStaticBrokerConfig
			res.Configs = append(res.Configs, conf)
		}
		resp.Resources = append(resp.Resources, res)
		return resp, nil, true
	})
	s := sessionSink(t, c, 0)
	if got := s.groupSessionTimeout(t.Context()); got != time.Minute {
		t.Fatalf("session timeout %s, want the coordinator's static 1m0s", got)
	}
	n := described.Load()
	if got := s.groupSessionTimeout(t.Context()); got != time.Minute || described.Load() != n {
		t.Fatalf("at the next join: session timeout %s, DescribeConfigs %d more times; want 1m0s remembered", got, described.Load()-n)
	}
}

// TestGroupSessionTimeoutBrokersSilent (from a review): brokers that take
// DescribeConfigs and never answer held every KIP-848 join for 20s (two
// lookups of 10s each). The lookup must end within 5s, assume the larger
// of Kafka's default and the member's own session timeout (erring
// towards reporting a cut-off member late rather than a kept one
// wrongly), and read again at the next join, keeping what it reads.
func TestGroupSessionTimeoutBrokersSilent(t *testing.T) {
	c := newSessionCluster(t, kfake.BrokerConfigs(map[string]string{"group.consumer.session.timeout.ms": "6000"}))
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	var silent atomic.Bool
	silent.Store(true)
	c.ControlKey(int16(kmsg.DescribeConfigs), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if silent.Load() {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	for _, own := range []time.Duration{0, time.Minute} {
		s := sessionSink(t, c, own)
		start := time.Now()
		got := s.groupSessionTimeout(t.Context())
		if took := time.Since(start); took > sessionLookupTimeout+2*time.Second {
			t.Errorf("own session timeout %s: the lookup took %s", own, took)
		}
		if want := max(defaultSessionTimeout, own); got != want {
			t.Errorf("own session timeout %s, brokers silent: assumed %s, want %s", own, got, want)
		}
		if own == 0 {
			continue
		}
		// The brokers answer again: the next join reads the group's, and
		// keeps it.
		silent.Store(false)
		free()
		if got := s.groupSessionTimeout(t.Context()); got != 6*time.Second {
			t.Errorf("at the next join, brokers answering: %s, want the brokers' 6s", got)
		}
		if s.groupSession != 6*time.Second {
			t.Errorf("the 6s read is not kept (%s)", s.groupSession)
		}
	}
}

// newSessionCluster starts a kfake cluster of three brokers: a group's
// coordinator is not always the broker a request goes to first.
func newSessionCluster(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// sessionSink is a KIP-848 Sink of c with its own session timeout own,
// enough to read its group's.
func sessionSink(t *testing.T, c *kfake.Cluster, own time.Duration) *Sink {
	t.Helper()
	b, err := Dial(t.Context(), c.ListenAddrs(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &Sink{broker: b, log: slog.New(slog.DiscardHandler),
		cfg: Config{Group: "floe-session", GroupProtocol: GroupConsumer, SessionTimeout: own}}
}
