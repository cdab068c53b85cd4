//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/localstack"
)

// TestReadyzGroupMemberDuringBrokerOutage (from an SRE review): docs/deployment.md
// says /readyz answers 503 while a pipeline is retrying "(a storage,
// catalog or broker outage ...)". A sink without --group does: during a
// broker outage every probe got 503. A --group member did not: each retry
// starts a session that "waits for the group to assign partitions"
// (connector/group.go calls OnSession as soon as the client is created,
// before the broker answered), which sets the pipeline running again, so
// /readyz answered 200 "ok" on 19 of 20 probes over 10s with the broker
// down, and a readiness probe with failureThreshold 3 never fires.
func TestReadyzGroupMemberDuringBrokerOutage(t *testing.T) {
	_, loc := sinkStack(t) // its catalog and warehouse; the broker is b
	b := startFaultBroker(t, "127.0.0.1", nil)
	if err := localstack.CreateTopic(t.Context(), []string{b.addr()}, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	ctx, cancel := context.WithCancel(t.Context())
	done := liveFloe(ctx, append([]string{"sink", "-b", b.addr(), "-t", "orders", "--table", "lake.orders", "--group", "g",
		"--metrics-addr", addr, "--lag-interval", "200ms", "--flush-interval", "300ms", "--retry-for", "5m"}, loc...)...)
	defer func() { cancel(); <-done }()
	waitHTTP(t, "http://"+addr+"/readyz")

	b.stop()
	metric := func(name string) string {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(body)) {
			if strings.HasPrefix(line, name+"{") {
				return strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:])
			}
		}
		return ""
	}
	waitFor(t, time.Minute, "a retry after the broker stopped", func() bool {
		v := metric("floe_transient_errors_total")
		return v != "" && v != "0"
	})
	samples, ready := 40, 0
	for range samples {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			ready++
			if ready == 1 {
				t.Logf("/readyz with the broker down: 200 %s", strings.TrimSpace(string(body)))
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	if ready > samples/4 {
		t.Errorf("with the broker down, /readyz of a --group member answered 200 on %d of %d probes over 10s; want 503 (retrying), as a sink without --group answers", ready, samples)
	}
}
