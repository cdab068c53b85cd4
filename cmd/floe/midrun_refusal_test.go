//go:build linux

package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// get is the body of http://addr+path, "" when it does not answer.
func get(addr, path string) string {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// transientErrors is floe_transient_errors_total as /metrics on addr
// says it ("" when it does not answer).
func transientErrors(addr string) string {
	for line := range strings.Lines(get(addr, "/metrics")) {
		if strings.HasPrefix(line, "floe_transient_errors_total{") {
			return strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:])
		}
	}
	return ""
}

// TestMidRunExpiredBrokerCertificate (from an operator's run, F1 and F8):
// brokers restarted with an expired certificate under a running sink
// stopped it within a second with the library's error ("describe topic
// orders: unable to dial: tls: failed to verify certificate: ..."),
// where a starting sink names the expired certificate and its fix, and
// where a broker restart or a refused SASL authentication is retried for
// --retry-for. It is retried: /healthz says retrying with the named cause
// and floe_transient_errors_total moves; the right certificate coming
// back heals it (running again, records sunk); an expired one for
// --retry-for stops the sink with exit 2 and the message a starting sink
// gives, after one ERROR line naming it.
func TestMidRunExpiredBrokerCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "good")
	now := time.Now()
	validCert, validKey := ca.leaf(t, dir, "valid", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	expiredCert, expiredKey := ca.leaf(t, dir, "expired", now.AddDate(-1, 0, 0), now.Add(-time.Hour))
	load := func(cert, key string) *tls.Certificate {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	valid, expired := load(validCert, validKey), load(expiredCert, expiredKey)
	// The certificate the broker presents: swapped, then the broker
	// restarted so that every connection handshakes again.
	var serving atomic.Pointer[tls.Certificate]
	serving.Store(valid)
	tc := &tls.Config{MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return serving.Load(), nil }}
	b := &faultBroker{t: t, dir: t.TempDir(), host: "127.0.0.1", opts: []kfake.Opt{kfake.TLS(tc)}}
	b.start()
	t.Cleanup(b.stop)
	restartWith := func(c *tls.Certificate) {
		serving.Store(c)
		b.stop()
		b.start()
	}
	clientOpts := []kgo.Opt{kgo.DialTLSConfig(caTLS(t, ca.file))}
	brokers := []string{b.addr()}
	const topic = "orders"
	if err := localstack.CreateTopic(t.Context(), brokers, topic, 1, nil, clientOpts...); err != nil {
		t.Fatal(err)
	}
	produce := func(from, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", from+i), Value: fmt.Appendf(nil, `{"i":%d}`, from+i)})
		}
		if err := localstack.Produce(t.Context(), brokers, recs, clientOpts...); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, 20)
	cat, catFlags := localCatalog(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "--brokers", b.addr(), "--kafka-tls-ca", ca.file, "--topic", topic, "--table", "lake.orders",
		"--flush-interval", "200ms", "--retry-for", "8s", "--metrics-addr", metricsAddr}, catFlags...)...)
	stopped := false
	defer func() {
		// Stopped before the test's folders are removed, which it writes in.
		cancel()
		if !stopped {
			<-done
		}
	}()
	waitFor(t, 15*time.Second, "the sink to commit the first records", func() bool { return sunkTo(t, cat, "lake.orders", topic, 0) == 20 })

	restartWith(expired)
	var health string
	retrying := waitForOK(6*time.Second, func() bool {
		select {
		case r := <-done:
			stopped = true
			t.Fatalf("the sink stopped at once after the brokers' certificate expired, within --retry-for 8s: %v\n%s", r.err, r.errs)
		default:
		}
		health = get(metricsAddr, "/healthz")
		return strings.Contains(health, `"state":"retrying"`) && strings.Contains(health, "has expired, or is not valid yet")
	})
	if !retrying {
		t.Errorf("/healthz while the brokers' certificate is expired does not say retrying with the cause: %s", health)
	}
	if n := transientErrors(metricsAddr); n == "" || n == "0" {
		t.Errorf("floe_transient_errors_total while the brokers' certificate is expired: %q, want it counted", n)
	}

	restartWith(valid)
	produce(20, 10)
	waitFor(t, 15*time.Second, "the sink to commit once the valid certificate is back", func() bool { return sunkTo(t, cat, "lake.orders", topic, 0) == 30 })
	if !waitForOK(5*time.Second, func() bool {
		health = get(metricsAddr, "/healthz")
		return strings.Contains(health, `"state":"running"`) && !strings.Contains(health, `"error"`)
	}) {
		t.Errorf("/healthz once the valid certificate is back: %s, want running without an error", health)
	}

	restartWith(expired)
	start := time.Now()
	var r floeRun
	select {
	case r = <-done:
		stopped = true
	case <-time.After(30 * time.Second):
		t.Fatal("the sink still runs 30 s after the brokers' certificate expired (--retry-for 8s)")
	}
	took := time.Since(start)
	msg := ""
	if r.err != nil {
		msg = withFlags(r.err)
	}
	t.Logf("stopped after %s: %s", took.Round(time.Millisecond), msg)
	if took < 7*time.Second || !strings.Contains(msg, "the brokers' certificate has expired, or is not valid yet (renew it on the brokers, or check this host's clock)") ||
		!strings.Contains(msg, "gave up after retrying for 8s") {
		t.Errorf("sink whose brokers' certificate expired stopped after %s with %q, want after --retry-for 8s with the message of a start", took, msg)
	}
	if n := strings.Count(r.errs, "level=ERROR msg=\"the brokers' connections fail: the brokers' certificate has expired"); n != 2 {
		t.Errorf("%d ERROR lines naming the expired certificate, want one for each of the 2 times it expired:\n%s", n, r.errs)
	}
}

// TestMidRunRotatedPasswordHealth (from an operator's run, F8): while the
// brokers refused a running sink's SASL authentication (password
// rotated), /healthz said running with no error and no metric moved, for
// the whole --retry-for. It says retrying with the refusal, and
// floe_transient_errors_total counts it; once the brokers accept the
// password again, running again.
func TestMidRunRotatedPasswordHealth(t *testing.T) {
	const topic, rotatedPass = "orders", "rotated-Secret-2b2b"
	c := startSecureCluster(t, false, kfake.User("SCRAM-SHA-512", floeUser, floePass),
		kfake.BrokerConfigs(map[string]string{"connections.max.reauth.ms": "3000"}))
	count := c.topic(t, topic, 1, 20)
	cat, catFlags := localCatalog(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	done := liveFloe(ctx, append(append([]string{"sink", "--topic", topic, "--table", "lake.orders", "--flush-interval", "200ms",
		"--retry-for", "60s", "--metrics-addr", metricsAddr}, c.userFlags("SCRAM-SHA-512", floeUser, floePass)...), catFlags...)...)
	defer func() {
		cancel()
		<-done
	}()
	waitFor(t, 15*time.Second, "the sink to commit the first records", func() bool { return sunkTo(t, cat, "lake.orders", topic, 0) == count[0] })
	adm := kadm.NewClient(mustClient(t, c.brokers, c.admin))
	setPassword := func(pass string) {
		t.Helper()
		res, err := adm.AlterUserSCRAMs(t.Context(), nil, []kadm.UpsertSCRAM{{User: floeUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pass}})
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	setPassword(rotatedPass)
	var health string
	if !waitForOK(20*time.Second, func() bool {
		health = get(metricsAddr, "/healthz")
		return strings.Contains(health, `"state":"retrying"`) && strings.Contains(health, "refuse SASL authentication as User:"+floeUser)
	}) {
		t.Errorf("/healthz while the brokers refuse the password: %s, want retrying with the refusal", health)
	}
	if n := transientErrors(metricsAddr); n == "" || n == "0" {
		t.Errorf("floe_transient_errors_total while the brokers refuse the password: %q, want it counted", n)
	}
	if strings.Contains(health, floePass) || strings.Contains(health, rotatedPass) {
		t.Error("/healthz holds a password")
	}
	setPassword(floePass)
	count = c.produce(t, topic, 1, 10, count)
	waitFor(t, 20*time.Second, "the sink to commit once the password is accepted again", func() bool { return sunkTo(t, cat, "lake.orders", topic, 0) == count[0] })
	if !waitForOK(5*time.Second, func() bool {
		health = get(metricsAddr, "/healthz")
		return strings.Contains(health, `"state":"running"`) && !strings.Contains(health, `"error"`)
	}) {
		t.Errorf("/healthz once the password is accepted again: %s, want running without an error", health)
	}
}
