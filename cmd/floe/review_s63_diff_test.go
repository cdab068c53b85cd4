//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
)

// TestReviewS63DiffStorageOutageNotBrokersDown: a sink whose --brokers
// lists, beside the live broker, one that takes no connection (a retired
// host still in the bootstrap list; franz-go dials each seed in turn, the
// live cluster's brokers stay connected) meets an object-store outage and
// gives up after --retry-for. It must name the object store, not say that
// no broker takes a connection: the brokers answered throughout.
func TestReviewS63DiffStorageOutageNotBrokersDown(t *testing.T) {
	e := newS3Env(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 1, 50, count)
	const dead = "127.0.0.1:39617" // nothing listens there
	args := []string{"sink", "--brokers", strings.Join(e.brokers, ",") + "," + dead, "--topic", "orders", "--table", "lake.orders",
		"--catalog", e.catalog, "--warehouse", e.warehouse(), "--flush-records", "10", "--flush-interval", "100ms", "--retry-for", "6s"}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	done := liveFloe(ctx, args...)
	waitFor(t, time.Minute, "the sink to commit the first records", func() bool {
		return sunkTo(t, e.catalogConfig(), "lake.orders", "orders", 0) == count[0]
	})
	// Long enough for franz-go to have tried each seed.
	time.Sleep(3 * time.Second)
	e.s3.Stop()
	produceRound(t, e.brokers, "orders", 1, 20, count)
	var r floeRun
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		cancel()
		<-done
		t.Fatal("the sink did not stop")
	}
	if r.err == nil {
		t.Fatalf("the sink ended without an error after its object store went away:\n%s", r.errs)
	}
	msg := withFlags(r.err)
	if strings.Contains(msg, "cannot reach brokers") || strings.Contains(msg, "check --brokers") || strings.Contains(r.errs, "no broker takes a connection") {
		t.Errorf("an object-store outage, with the brokers answering throughout, was named as brokers out of reach:\nerror: %s\nlog:\n%s", msg, r.errs)
	}
}
