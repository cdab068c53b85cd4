package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// readyCode is /readyz's status code on addr and its body (0 when it
// does not answer).
func readyCode(addr string) (int, string) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMidRunBrokerHung (from a deploy walker's run): a broker that hangs
// under a running sink (its process stopped: connections taken, nothing
// answered) was retried as a "transient storage, catalog or broker error"
// naming no broker, and /readyz said ready for ~43 s, then named only
// franz-go's "unable to dial: context deadline exceeded". The sink's log
// names the broker that does not answer, /readyz turns 503 within a few
// seconds past --request-timeout naming it, and once the broker answers
// again the sink is ready and commits the rest exactly once.
func TestMidRunBrokerHung(t *testing.T) {
	t.Run("static", func(t *testing.T) { sinkThroughHang(t, nil) })
	t.Run("group", func(t *testing.T) { sinkThroughHang(t, []string{"--group", "g-hung"}) })
}

// sinkThroughHang runs a sink (extra: more flags) while its broker hangs
// and answers again.
func sinkThroughHang(t *testing.T, extra []string) {
	proxy := floetest.NewHungProxy(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(proxy.ListenBehind), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	broker := proxy.Addr()
	const topic = "orders"
	produce := func(from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"i":%d}`, from+i)})
		}
		if err := localstack.Produce(t.Context(), []string{broker}, recs); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 20)
	cat, catFlags := localCatalog(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	const requestTimeout = time.Second
	done := liveFloe(ctx, append([]string{"sink", "--brokers", broker, "--topic", topic, "--table", "lake.orders",
		"--flush-interval", "200ms", "--retry-for", "5m", "--request-timeout", requestTimeout.String(), "--metrics-addr", metricsAddr}, append(extra, catFlags...)...)...)
	stopped := false
	defer func() {
		cancel()
		if !stopped {
			<-done
		}
	}()
	waitFor(t, 15*time.Second, "the sink to commit the first records", func() bool { return sunkTo(t, cat, "lake.orders", topic, 0) == 20 })
	waitFor(t, 5*time.Second, "/readyz to say ready", func() bool { code, _ := readyCode(metricsAddr); return code == http.StatusOK })

	proxy.Pause()
	hung := time.Now()
	// The request timeout, the sink's checks of the log (every 2 s) and the
	// watch of the connections (every second); more on a busy machine.
	bound := requestTimeout + 6*time.Second
	var code int
	var body string
	for code != http.StatusServiceUnavailable && time.Since(hung) < 20*time.Second {
		time.Sleep(100 * time.Millisecond)
		code, body = readyCode(metricsAddr)
	}
	took := time.Since(hung)
	t.Logf("/readyz %d %s after the broker hung: %s", code, took.Round(time.Millisecond), body)
	if code != http.StatusServiceUnavailable || took > bound {
		t.Errorf("/readyz answered %d %s after the broker hung (--request-timeout %s), want 503 within %s", code, took.Round(time.Millisecond), requestTimeout, bound)
	}
	if !strings.Contains(body, "cannot reach brokers "+broker+" (not answering: no answer within ") {
		t.Errorf("/readyz while the broker hangs: %s\nwant it to name %s, not answering", body, broker)
	}

	proxy.Resume()
	waitFor(t, 15*time.Second, "/readyz to say ready again once the broker answers", func() bool { code, _ := readyCode(metricsAddr); return code == http.StatusOK })
	produce(20, 10)
	waitFor(t, 15*time.Second, "the sink to commit once the broker answers again", func() bool { return sunkTo(t, cat, "lake.orders", topic, 0) == 30 })
	cancel()
	r := <-done
	stopped = true
	if r.err != nil {
		t.Fatalf("the sink stopped with %v\n%s", r.err, r.errs)
	}
	if !strings.Contains(r.errs, `level=WARN msg="a broker does not answer`) || !strings.Contains(r.errs, "cannot reach brokers "+broker+" (not answering") {
		t.Errorf("the log does not say that broker %s does not answer:\n%s", broker, r.errs)
	}
	if strings.Contains(r.errs, "transient storage, catalog or broker error") {
		t.Errorf("the log calls the hung broker a storage, catalog or broker error:\n%s", r.errs)
	}
	checkTable(t, cat, "lake.orders", topic, map[int32]int64{0: 30})
	out := mustFloe(t, append([]string{"audit", "--table", "lake.orders", "--brokers", broker, "--deep"}, catFlags...)...)
	if !strings.Contains(out, "verdict: COMPLETE") {
		t.Errorf("floe audit after the hang:\n%s", out)
	}
}

// TestRequestTimeoutTooShort: franz-go refuses a request timeout under
// 100 ms; floe says so naming the flag, before it dials.
func TestRequestTimeoutTooShort(t *testing.T) {
	_, catFlags := localCatalog(t)
	code, _, errs := floe(t, append([]string{"sink", "-t", "orders", "--table", "lake.orders", "-b", refusedTCPAddr(t), "--request-timeout", "50ms"}, catFlags...)...)
	if code != exitError || !strings.Contains(errs, "--request-timeout 50ms: want at least 100ms") {
		t.Errorf("floe sink --request-timeout 50ms: exit %d, stderr %q", code, errs)
	}
}
