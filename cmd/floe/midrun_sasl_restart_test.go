//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/floe-dev/floe/localstack"
)

// TestMidRunPasswordRotatedByRestart (from a new user's run): the secured
// local stack restarted with a new password (its tls/password deleted)
// under a running sink. The brokers closed every connection and refused
// each new one's SASL authentication, so the sink's requests failed with
// a bare EOF: /healthz, /status.json and every retry line said
// "describe topic orders: EOF", a "transient storage, catalog or broker
// error", for the whole --retry-for, where docs/secured-kafka.md promises
// retrying with the refusal. They name the refusal, and the retry lines
// are classified as the brokers' TLS or SASL check.
func TestMidRunPasswordRotatedByRestart(t *testing.T) {
	dir := t.TempDir()
	l, opts := upOnFreePorts(t, localstack.UpOptions{Dir: dir, Secure: true})
	if err := writeLocalFiles(l); err != nil {
		t.Fatal(err)
	}
	const topic = "orders"
	admin := []kgo.Opt{kgo.DialTLSConfig(caTLS(t, l.Certs.CAFile)), kgo.SASL(scram.Auth{User: localstack.SecureUser, Pass: l.Password}.AsSha512Mechanism())}
	if err := localstack.CreateTopic(t.Context(), l.Brokers, topic, 1, nil, admin...); err != nil {
		t.Fatal(err)
	}
	sc := &secureCluster{brokers: l.Brokers, certs: l.Certs, admin: admin}
	count := sc.produce(t, topic, 1, 20, map[int32]int64{})
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// floe.yaml holds the stack's password as the sink started: the old
	// one once the stack restarts with a new one.
	done := liveFloe(ctx, "sink", "--config", filepath.Join(dir, "floe.yaml"), "--topic", topic, "--table", "lake.orders",
		"--flush-interval", "200ms", "--retry-for", "2m", "--metrics-addr", metricsAddr)
	stopped := false
	defer func() {
		cancel()
		if !stopped {
			<-done
		}
		l.Close()
	}()
	waitFor(t, 20*time.Second, "the sink to commit the first records", func() bool { return sunkTo(t, l.Catalog(), "lake.orders", topic, 0) == count[0] })

	l.Close()
	if err := os.Remove(l.PasswordFile()); err != nil {
		t.Fatal(err)
	}
	oldPass := l.Password
	var err error
	if l, err = localstack.Up(t.Context(), opts); err != nil {
		t.Fatal(err)
	}
	if l.Password == oldPass {
		t.Fatal("the restarted stack kept its password")
	}
	const refusal = "refuse SASL authentication as User:" + localstack.SecureUser
	var health, status string
	if !waitForOK(30*time.Second, func() bool {
		select {
		case r := <-done:
			stopped = true
			t.Fatalf("the sink stopped within --retry-for 2m: %v\n%s", r.err, r.errs)
		default:
		}
		health, status = get(metricsAddr, "/healthz"), get(metricsAddr, "/status.json")
		return strings.Contains(health, `"state":"retrying"`) && strings.Contains(health, refusal) && strings.Contains(status, refusal)
	}) {
		t.Errorf("while the brokers refuse the password, /healthz: %s\n/status.json: %s\nwant retrying with the refusal in both", health, status)
	}
	// The sink's requests fail too once it asks the brokers (its looks
	// at the topic, half a minute or so later, and each start of a
	// session after that): the refusal stays named meanwhile.
	for end := time.Now().Add(45 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		select {
		case r := <-done:
			stopped = true
			t.Fatalf("the sink stopped within --retry-for 2m: %v\n%s", r.err, r.errs)
		default:
		}
		if health, status = get(metricsAddr, "/healthz"), get(metricsAddr, "/status.json"); !strings.Contains(health, refusal) || !strings.Contains(status, refusal) {
			t.Errorf("while the brokers refuse the password, /healthz: %s\n/status.json: %s\nwant the refusal in both", health, status)
			break
		}
	}
	cancel()
	r := <-done
	stopped = true
	retries := 0
	for line := range strings.Lines(r.errs) {
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, "starting again from the ledger after a pause") {
			continue
		}
		retries++
		if !strings.Contains(line, "the brokers' connections fail their TLS or SASL check") || !strings.Contains(line, refusal) {
			t.Errorf("retry line while the brokers refuse the password does not name the refusal:\n%s", line)
		}
	}
	if retries == 0 {
		t.Errorf("no retry line while the brokers refused the password:\n%s", r.errs)
	}
	if strings.Contains(r.out+r.errs+health+status, oldPass) || strings.Contains(r.out+r.errs+health+status, l.Password) {
		t.Error("the output holds a password")
	}
}
