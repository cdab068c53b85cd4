package connector_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
)

// TestSessionOnHungBrokerNamed (from a deploy walker's run): a broker
// that hangs under a running sink (its process stopped) failed the
// session, once franz-go had retried its request for its RetryTimeout,
// with "i/o timeout" or "unable to dial: context deadline exceeded",
// which the retry logged as a "transient storage, catalog or broker
// error". The retry names the broker that does not answer; the sink
// commits the rest exactly once when it answers again; and one that
// never does gives up after RetryFor naming it, as a starting sink does.
func TestSessionOnHungBrokerNamed(t *testing.T) {
	fe, proxy := floetest.NewBehindProxy(t)
	e := &env{Env: fe}
	const topic, table = "hung", "lake.hung"
	e.Topic(topic, 2, nil)
	tbl := e.Table(table)
	broker := proxy.Addr()
	// Short timeouts, so that the session fails within seconds: a request
	// waits 500 ms for its answer and is retried for 2 s.
	dial := func() *connector.Broker {
		b, err := connector.Dial(e.Ctx, e.Stack.Brokers, floetest.DialTimeout, kgo.RequestTimeoutOverhead(500*time.Millisecond), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		return b
	}
	run := func(cfg connector.Config) (<-chan error, context.CancelFunc) {
		s, err := connector.NewSink(dial(), tbl, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(e.Ctx)
		done := make(chan error, 1)
		go func() {
			_, err := s.Run(ctx)
			done <- err
		}()
		return done, stop
	}
	for p := range int32(2) {
		e.Produce(records(topic, p, 10, "before"))
	}
	var logs floetest.SyncBuffer
	done, stop := run(connector.Config{Topic: topic, FlushInterval: 200 * time.Millisecond, RetryFor: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	waitLedger(t, e, table, e.endOffsets(topic), 15*time.Second)

	start := time.Now()
	proxy.Pause()
	retry := `msg="brokers ` + broker + ` do not answer; starting again from the ledger after a pause"`
	waitFor(t, 20*time.Second, "the sink's retry naming the hung broker", func() bool { return strings.Contains(logs.String(), retry) })
	if !strings.Contains(logs.String(), "cannot reach brokers "+broker+" (not answering: no answer within ") {
		t.Errorf("the retry does not say why:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "transient storage, catalog or broker error") {
		t.Errorf("the hung broker reads as a storage, catalog or broker error:\n%s", logs.String())
	}
	t.Logf("retry logged: %s", time.Since(start))
	proxy.Resume()
	for p := range int32(2) {
		e.Produce(records(topic, p, 10, "after"))
	}
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 20*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("sink: %v\n%s", err, logs.String())
	}
	checkExactlyOnce(t, tbl, want)
	t.Logf("recovered: %s", time.Since(start))

	// A broker that never answers again: the sink gives up after RetryFor,
	// naming it and --brokers.
	done, stop = run(connector.Config{Topic: topic, FlushInterval: 200 * time.Millisecond, RetryFor: 2 * time.Second, Logger: quietLogger()})
	defer stop()
	time.Sleep(500 * time.Millisecond) // its session started
	proxy.Pause()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the sink still runs 30 s after its broker hung (RetryFor 2s)")
	}
	t.Logf("gave up: %s", time.Since(start))
	proxy.Resume()
	check, ok := errors.AsType[*connector.CheckError](err)
	if !ok || check.Settings[0] != connector.SettingBrokers ||
		!strings.Contains(err.Error(), "gave up after retrying for 2s without a commit or catching up with the log: cannot reach brokers "+broker+" (not answering: no answer within ") {
		t.Errorf("sink whose broker hung for good: %v, want a CheckError of the brokers naming %s, not answering", err, broker)
	}
	checkExactlyOnce(t, tbl, want)
}
