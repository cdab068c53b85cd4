//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestMidRunBrokersGoneNamed: brokers that stop taking connections under
// a running sink ended it, after --retry-for, with franz-go's "unable to
// dial ... connection refused", where a starting sink says it cannot reach
// the brokers and to check --brokers (a user's run). Its retries say no
// broker takes a connection, and it stops with exit 2 naming the brokers,
// since when, and the flag (exit 2, as any error).
func TestMidRunBrokersGoneNamed(t *testing.T) {
	b := &faultBroker{t: t, dir: t.TempDir(), host: "127.0.0.1"}
	b.start()
	t.Cleanup(b.stop)
	brokers := []string{b.addr()}
	const topic = "orders"
	if err := localstack.CreateTopic(t.Context(), brokers, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"i":%d}`, i)})
	}
	if err := localstack.Produce(t.Context(), brokers, recs); err != nil {
		t.Fatal(err)
	}
	cat, catFlags := localCatalog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "--brokers", b.addr(), "--topic", topic, "--table", "lake.orders",
		"--flush-interval", "200ms", "--retry-for", "4s"}, catFlags...)...)
	waitFor(t, 15*time.Second, "the sink to commit the records", func() bool { return sunkTo(t, cat, "lake.orders", topic, 0) == 20 })
	b.stop()
	var r floeRun
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		cancel()
		<-done
		t.Fatal("the sink still runs 60 s after its brokers went away (--retry-for 4s)")
	}
	if r.err == nil {
		t.Fatalf("the sink ended without an error after its brokers went away:\n%s", r.errs)
	}
	msg := withFlags(r.err)
	if !strings.Contains(msg, "gave up after retrying for 4s") ||
		!strings.Contains(msg, "cannot reach brokers "+b.addr()+" (none has taken a connection since ") || !strings.HasSuffix(msg, "check --brokers") {
		t.Errorf("sink whose brokers went away: %q; want the brokers named, and --brokers", msg)
	}
	if !strings.Contains(r.errs, "no broker takes a connection ("+b.addr()+"); starting again from the ledger after a pause") {
		t.Errorf("the retries do not say that no broker takes a connection:\n%s", r.errs)
	}
}
