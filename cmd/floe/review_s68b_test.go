package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
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

// TestReviewS68bLongHangStays503: a broker that hangs for longer than
// hangWindow (2 request timeouts + 15 s): /readyz must stay 503 for as
// long as it hangs, and the sink resume exactly once after.
func TestReviewS68bLongHangStays503(t *testing.T) {
	crashScenario(t)
	const topic = "long"
	_, proxies := s68bCluster(t, 1, topic, 1)
	p := proxies[0]
	s68bProduce(t, p.Addr(), topic, 0, 0, 10)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	metricsAddr, done, sunk := s68bSink(t, ctx, p.Addr(), topic)
	defer func() { cancel(); <-done }()
	waitFor(t, 15*time.Second, "the first commit", func() bool { return sunk() == 10 })
	waitFor(t, 5*time.Second, "/readyz 200", func() bool { c, _ := readyCode(metricsAddr); return c == http.StatusOK })
	p.Pause()
	start := time.Now()
	var was503 bool
	var flips []string
	for time.Since(start) < 40*time.Second {
		c, body := readyCode(metricsAddr)
		if c == http.StatusServiceUnavailable {
			was503 = true
		} else if was503 {
			flips = append(flips, fmt.Sprintf("%s: %d %s", time.Since(start).Round(100*time.Millisecond), c, body))
		}
		time.Sleep(250 * time.Millisecond)
	}
	p.Resume()
	if !was503 || len(flips) > 0 {
		t.Errorf("/readyz while the broker hung 40 s: ever 503 %v; back to 200 while it still hung %d times; first %v", was503, len(flips), flips)
	}
	s68bProduce(t, p.Addr(), topic, 0, 10, 5)
	waitFor(t, 30*time.Second, "the sink to commit once the broker answers", func() bool { return sunk() == 15 })
}

// TestReviewS68bCommitDuringHangKeeps503: a broker hangs while the sink
// holds records it read before (a flush not yet due): the readiness watch
// turns /readyz 503 once, on the edge, and the commit of those records
// (which needs only the catalog) must not turn it back to 200 while the
// broker still hangs and nothing more can be read.
func TestReviewS68bCommitDuringHangKeeps503(t *testing.T) {
	crashScenario(t)
	const topic = "held"
	_, proxies := s68bCluster(t, 1, topic, 1)
	p := proxies[0]
	s68bProduce(t, p.Addr(), topic, 0, 0, 10)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	metricsAddr, done, sunk := s68bSink(t, ctx, p.Addr(), topic, "--flush-interval", "5s")
	defer func() { cancel(); <-done }()
	waitFor(t, 20*time.Second, "the first commit", func() bool { return sunk() == 10 })
	waitFor(t, 5*time.Second, "/readyz 200", func() bool { c, _ := readyCode(metricsAddr); return c == http.StatusOK })
	s68bProduce(t, p.Addr(), topic, 0, 10, 5)
	time.Sleep(time.Second) // read, its flush due in 4 s
	p.Pause()
	start := time.Now()
	var was503 bool
	var flips []string
	for time.Since(start) < 20*time.Second {
		c, body := readyCode(metricsAddr)
		if c == http.StatusServiceUnavailable {
			was503 = true
		} else if was503 {
			flips = append(flips, fmt.Sprintf("%s: %d %s", time.Since(start).Round(100*time.Millisecond), c, body))
		}
		time.Sleep(250 * time.Millisecond)
	}
	committed := sunk()
	p.Resume()
	t.Logf("committed while hung: %d", committed)
	if !was503 || len(flips) > 0 {
		t.Errorf("/readyz while the broker hung 20 s: ever 503 %v; back to 200 while it still hung %d times; first %v; last %v", was503, len(flips), flips[:min(1, len(flips))], flips[max(0, len(flips)-1):])
	}
	s68bProduce(t, p.Addr(), topic, 0, 15, 5)
	waitFor(t, 30*time.Second, "the sink to commit once the broker answers", func() bool { return sunk() == 20 })
}

// TestReviewS68bLeaderHungAtStart: the broker leading the sink's
// partition hangs when the sink starts, its seed (another broker)
// answering: /readyz must say 503 naming the hung broker, never 200, and
// the sink commit once it answers.
func TestReviewS68bLeaderHungAtStart(t *testing.T) {
	const topic = "atstart"
	cluster, proxies := s68bCluster(t, 2, topic, 1)
	var nodes []int32
	for n := range proxies {
		nodes = append(nodes, n)
	}
	if err := cluster.MoveTopicPartition(topic, 0, nodes[1]); err != nil {
		t.Fatal(err)
	}
	seed, hung := proxies[nodes[0]], proxies[nodes[1]]
	s68bProduce(t, seed.Addr(), topic, 0, 0, 10)
	hung.Pause()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	metricsAddr, done, sunk := s68bSink(t, ctx, seed.Addr(), topic)
	defer func() { cancel(); <-done }()
	start := time.Now()
	var codes []string
	var was503, was200 bool
	var last string
	for time.Since(start) < 20*time.Second {
		c, body := readyCode(metricsAddr)
		if c == http.StatusOK && was503 {
			// Before the first request timed out, nothing tells a hang
			// (the documented request timeout plus ~3 s).
			was200 = true
			codes = append(codes, fmt.Sprintf("%s: 200 %s", time.Since(start).Round(100*time.Millisecond), body))
		}
		if c == http.StatusServiceUnavailable && strings.Contains(body, "not answering") {
			// A 503 before (state starting) is not the watch's.
			was503, last = true, body
		}
		time.Sleep(250 * time.Millisecond)
	}
	hung.Resume()
	t.Logf("last 503: %s", last)
	if !was503 || was200 || !strings.Contains(last, "cannot reach brokers "+hung.Addr()) {
		t.Errorf("/readyz while the leader %s hung from the start: ever 503 %v (last %s); 200 at %v", hung.Addr(), was503, last, codes)
	}
	waitFor(t, 40*time.Second, "the sink to commit once the broker answers", func() bool { return sunk() == 10 })
}

// TestReviewS68bGroupRebalanceNotHung: a group member that joins late
// makes the first rejoin, and its JoinGroup and SyncGroup wait for the
// others (up to the rebalance timeout, far above --request-timeout 1s):
// no member may read as "not answering" meanwhile, and the table ends
// complete.
func TestReviewS68bGroupRebalanceNotHung(t *testing.T) {
	crashScenario(t)
	const topic = "grp"
	_, proxies := s68bCluster(t, 1, topic, 4)
	p := proxies[0]
	for part := range int32(4) {
		s68bProduce(t, p.Addr(), topic, part, 0, 5)
	}
	cat, catFlags := localCatalog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	member := func() (string, <-chan floeRun) {
		addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
		args := append([]string{"sink", "--brokers", p.Addr(), "--topic", topic, "--table", "lake." + topic, "--group", "g68b",
			"--flush-interval", "200ms", "--retry-for", "5m", "--request-timeout", "1s", "--rebalance-timeout", "8s", "--session-timeout", "6s",
			"--metrics-addr", addr}, catFlags...)
		return addr, liveFloe(ctx, args...)
	}
	sunk := func() int64 {
		var n int64
		for part := range int32(4) {
			n += sunkTo(t, cat, "lake."+topic, topic, part)
		}
		return n
	}
	a, doneA := member()
	waitFor(t, 20*time.Second, "member a to commit", func() bool { return sunk() == 20 })
	waitFor(t, 5*time.Second, "/readyz 200 on a", func() bool { c, _ := readyCode(a); return c == http.StatusOK })
	b, doneB := member()
	start := time.Now()
	var hung []string
	for i := 0; time.Since(start) < 15*time.Second; i++ {
		for _, addr := range []string{a, b} {
			if c, body := readyCode(addr); c == http.StatusServiceUnavailable && strings.Contains(body, "not answering") {
				hung = append(hung, fmt.Sprintf("%s %s: %s", addr, time.Since(start).Round(100*time.Millisecond), body))
			}
		}
		if i%10 == 0 {
			s68bProduce(t, p.Addr(), topic, int32(i/10%4), 5+i/10, 1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	n := int64(20)
	for i := 0; i < 150; i += 10 {
		n++
	}
	waitFor(t, 20*time.Second, "both members to commit everything", func() bool { return sunk() == n })
	cancel()
	ra, rb := <-doneA, <-doneB
	if len(hung) > 0 {
		t.Errorf("a member read as not answering during a rebalance (%d times); first: %s\na: %s\nb: %s", len(hung), hung[0], ra.errs, rb.errs)
	}
	out := mustFloe(t, append([]string{"audit", "--table", "lake." + topic, "--brokers", p.Addr(), "--deep"}, catFlags...)...)
	if !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("floe audit after the rebalance:\n%s", out)
	}
}

// TestReviewS68bStartOnHungBroker: floe sink started while its only
// broker hangs (takes connections, answers nothing) waits --dial-timeout
// for an answer, as it waits for brokers that take no connection yet (a
// broker in a long pause at a pod's start), not two --request-timeout,
// and then says which broker does not answer and what to look at: it
// exited after 2 s with --dial-timeout 3s, saying only "(is Kafka running
// there?): read tcp ...: i/o timeout".
func TestReviewS68bStartOnHungBroker(t *testing.T) {
	const topic = "cold"
	_, proxies := s68bCluster(t, 1, topic, 1)
	p := proxies[0]
	p.Pause()
	defer p.Resume()
	_, catFlags := localCatalog(t)
	start := time.Now()
	code, _, errs := floe(t, append([]string{"sink", "--brokers", p.Addr(), "--topic", topic, "--table", "lake." + topic,
		"--request-timeout", "1s", "--dial-timeout", "3s"}, catFlags...)...)
	t.Logf("exit %d after %s: %s", code, time.Since(start).Round(100*time.Millisecond), errs)
	if took := time.Since(start); code == 0 || took < 3*time.Second || !strings.Contains(errs, "cannot reach brokers "+p.Addr()+" (no answer within 3s; is Kafka running there") ||
		!strings.Contains(errs, "stopped or overloaded") {
		t.Errorf("floe sink on a hung broker (--dial-timeout 3s, --request-timeout 1s): exit %d after %s\n%s", code, took.Round(100*time.Millisecond), errs)
	}
}

// TestReviewS68bSlowBrokerNotHung: a broker that answers every request,
// but each up to 400 ms late (under --request-timeout 1s), is not "not
// answering": /readyz stays 200 and the sink commits what comes.
func TestReviewS68bSlowBrokerNotHung(t *testing.T) {
	crashScenario(t)
	const topic = "slow"
	_, proxies := s68bCluster(t, 1, topic, 1)
	p := proxies[0]
	s68bProduce(t, p.Addr(), topic, 0, 0, 10)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	metricsAddr, done, sunk := s68bSink(t, ctx, p.Addr(), topic)
	defer func() { cancel(); <-done }()
	waitFor(t, 15*time.Second, "the first commit", func() bool { return sunk() == 10 })
	waitFor(t, 5*time.Second, "/readyz 200", func() bool { c, _ := readyCode(metricsAddr); return c == http.StatusOK })
	stop := make(chan struct{})
	slowed := make(chan struct{})
	go func() {
		defer close(slowed)
		for {
			select {
			case <-stop:
				p.Resume()
				return
			default:
			}
			p.Pause()
			time.Sleep(400 * time.Millisecond)
			p.Resume()
			time.Sleep(30 * time.Millisecond)
		}
	}()
	start := time.Now()
	var bad []string
	for time.Since(start) < 10*time.Second {
		if c, body := readyCode(metricsAddr); c != http.StatusOK {
			bad = append(bad, fmt.Sprintf("%s: %d %s", time.Since(start).Round(100*time.Millisecond), c, body))
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	<-slowed
	if len(bad) > 0 {
		t.Errorf("/readyz not 200 %d times while the broker answered within 400 ms (--request-timeout 1s); first: %s", len(bad), bad[0])
	}
	s68bProduce(t, p.Addr(), topic, 0, 10, 5)
	waitFor(t, 15*time.Second, "the commit after", func() bool { return sunk() == 15 })
}
