package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// s68bCluster is a kfake cluster of n brokers, each behind its own
// HungProxy, and the proxy of each broker by node ID.
func s68bCluster(t *testing.T, n int, topic string, partitions int32) (*kfake.Cluster, map[int32]*floetest.HungProxy) {
	t.Helper()
	var proxies []*floetest.HungProxy
	for range n {
		proxies = append(proxies, floetest.NewHungProxy(t))
	}
	next := 0
	listen := func(network, address string) (net.Listener, error) {
		p := proxies[next]
		next++
		return p.ListenBehind(network, address)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(n), kfake.ListenFn(listen), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(proxies[0].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).BrokerMetadata(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byNode := map[int32]*floetest.HungProxy{}
	for _, b := range md.Brokers {
		addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		for _, p := range proxies {
			if p.Addr() == addr {
				byNode[b.NodeID] = p
			}
		}
	}
	if len(byNode) != n {
		t.Fatalf("brokers %v: not each behind its proxy", md.Brokers)
	}
	return cluster, byNode
}

// s68bSink starts floe sink on topic into lake.<topic> against brokers,
// returning the catalog, its flags, the metrics address and the run.
func s68bSink(t *testing.T, ctx context.Context, brokers, topic string, extra ...string) (string, <-chan floeRun, func() int64) {
	t.Helper()
	cat, catFlags := localCatalog(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	args := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake." + topic,
		"--flush-interval", "200ms", "--retry-for", "5m", "--request-timeout", "1s", "--metrics-addr", metricsAddr}, extra...)
	done := liveFloe(ctx, append(args, catFlags...)...)
	sunk := func() int64 {
		var n int64
		for p := int32(0); p < 4; p++ {
			n += sunkTo(t, cat, "lake."+topic, topic, p)
		}
		return n
	}
	return metricsAddr, done, sunk
}

func s68bProduce(t *testing.T, broker, topic string, p int32, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, `{"i":%d}`, from+i)})
	}
	if err := localstack.Produce(t.Context(), []string{broker}, recs, kgo.RecordPartitioner(kgo.ManualPartitioner())); err != nil {
		t.Fatal(err)
	}
}

// TestReviewS68bHungBrokerLeadingNothing: in a three-broker cluster, a
// broker that hangs but leads no partition of the sink's topic (and
// coordinates nothing for it) does not stop the sink: it reads and commits
// every record. /readyz must stay 200: it answers 503 "while the sink
// cannot make progress" (docs/deployment.md), and a 503 here takes a
// healthy sink out of service and pages someone for another team's broker.
func TestReviewS68bHungBrokerLeadingNothing(t *testing.T) {
	const topic = "lone"
	cluster, proxies := s68bCluster(t, 3, topic, 1)
	leader := cluster.LeaderFor(topic, 0)
	var hung int32 = -1
	for node := range proxies {
		if node != leader {
			hung = node
			break
		}
	}
	seed := proxies[leader].Addr()
	s68bProduce(t, seed, topic, 0, 0, 10)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	metricsAddr, done, sunk := s68bSink(t, ctx, seed, topic)
	defer func() { cancel(); <-done }()
	waitFor(t, 15*time.Second, "the first commit", func() bool { return sunk() == 10 })
	waitFor(t, 5*time.Second, "/readyz 200", func() bool { c, _ := readyCode(metricsAddr); return c == http.StatusOK })

	proxies[hung].Pause()
	defer proxies[hung].Resume()
	start := time.Now()
	var bad []string
	// A quiet topic's healthy sink: nothing to read, its leader answers.
	for time.Since(start) < 12*time.Second {
		if c, body := readyCode(metricsAddr); c != http.StatusOK {
			bad = append(bad, fmt.Sprintf("%s: %d %s", time.Since(start).Round(100*time.Millisecond), c, body))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// It progresses: new records are committed while the broker hangs.
	s68bProduce(t, seed, topic, 0, 10, 5)
	waitFor(t, 20*time.Second, "the records produced while the broker hangs to be committed", func() bool { return sunk() == 15 })
	t.Logf("sunk %d records while broker %d (%s, leading nothing) hung", sunk(), hung, proxies[hung].Addr())
	if len(bad) > 0 {
		t.Errorf("/readyz not 200 %d times while the sink progressed and only broker %d (%s), leading no partition of %s, hung; first: %s; last: %s",
			len(bad), hung, proxies[hung].Addr(), topic, bad[0], bad[len(bad)-1])
	}
}
