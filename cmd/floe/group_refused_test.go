package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/localstack"
)

// TestGroupOfAnotherApplication (from a review): --group names a group an
// application's consumer (range assignor) is a member of. floe rejoined
// every few seconds for ever ("the consumer group dropped this member"),
// even with --retry-for 0s; it stops, naming the conflict and --group.
func TestGroupOfAnotherApplication(t *testing.T) {
	st := ordersStack(t)
	app, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers...), kgo.ConsumerGroup("app"), kgo.ConsumeTopics("orders"), kgo.Balancers(kgo.RangeBalancer()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	pctx, pcancel := context.WithTimeout(t.Context(), 10*time.Second)
	for n := 0; n < 40 && pctx.Err() == nil; {
		n += app.PollFetches(pctx).NumRecords()
	}
	pcancel()
	go func() {
		for t.Context().Err() == nil {
			app.PollFetches(t.Context())
		}
	}()
	_, catFlags := localCatalog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	start := time.Now()
	_, errs, err := floeCtx(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--group", "app",
		"--session-timeout", "6s", "--rebalance-timeout", "10s", "--retry-for", "0s"}, catFlags...)...)
	t.Logf("after %s: %v", time.Since(start).Round(time.Second), err)
	if ctx.Err() != nil || err == nil || !strings.Contains(withFlags(err), "has members that assign partitions another way") || !strings.Contains(withFlags(err), "check --group") {
		t.Fatalf("floe sink --group app beside the application's range-assignor member: %v; it said:\n%s", err, errs)
	}
}

// TestSessionTimeoutOutOfRange (from a review): --session-timeout below
// the brokers' group.min.session.timeout.ms (6 s by default, kfake's too)
// is refused by the coordinator with INVALID_SESSION_TIMEOUT at every
// join; floe rejoined for ever. It stops, naming --session-timeout and the
// brokers' range.
func TestSessionTimeoutOutOfRange(t *testing.T) {
	st := ordersStack(t)
	_, catFlags := localCatalog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, errs, err := floeCtx(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--group", "g47",
		"--session-timeout", "2s", "--rebalance-timeout", "10s", "--retry-for", "0s"}, catFlags...)...)
	t.Logf("after %s: %v", time.Since(start).Round(time.Second), err)
	if ctx.Err() != nil || err == nil || !strings.Contains(withFlags(err), "the brokers refuse a session timeout of 2s") || !strings.Contains(withFlags(err), "check --session-timeout") {
		t.Fatalf("floe sink --session-timeout 2s: %v; it said:\n%s", err, errs)
	}
}

// ordersStack starts a local stack with a topic orders of 2 partitions
// and 20 records.
func ordersStack(t *testing.T) *localstack.Stack {
	t.Helper()
	st, _, _ := partitionedStack(t, "orders", 2)
	produceRound(t, st.Brokers, "orders", 2, 20, map[int32]int64{})
	return st
}

// TestGroupOfTwoTables (from a review): two deployments sink one topic
// into two tables with the same --group (a copied config). The group
// divided the topic's partitions between them, each table got part of
// it, and each audit, seeing the rest as lag, said complete. A member
// that finds one sinking another table in its group stops, naming both
// tables and --group.
func TestGroupOfTwoTables(t *testing.T) {
	st := ordersStack(t)
	_, catFlags := localCatalog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	type result struct {
		table, errs string
		err         error
	}
	done := make(chan result, 2)
	for _, table := range []string{"lake.a", "lake.b"} {
		go func() {
			_, errs, err := floeCtx(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", table, "--group", "shared",
				"--session-timeout", "6s", "--rebalance-timeout", "10s", "--retry-for", "0s"}, catFlags...)...)
			done <- result{table, errs, err}
		}()
	}
	r := <-done
	cancel()
	<-done
	msg := ""
	if r.err != nil {
		msg = withFlags(r.err)
	}
	if !strings.Contains(msg, "consumer group shared has a member that sinks table lake.") || !strings.Contains(msg, "give each table a --group of its own") || !strings.Contains(msg, "check --group") {
		t.Fatalf("two tables in group shared: the first to stop (%s) said %q:\n%s", r.table, msg, r.errs)
	}
}

// TestGroupProtocolMixedHint (from an operator's run): a member started
// with the other --group-protocol than the group's members logged, every
// few seconds, "GROUP_ID_NOT_FOUND: The group id does not exist" of a
// group that exists. The warning names the likely cause. Such a member
// sinks nothing, and its /healthz said running (a new-user run); a classic
// member in a group of the consumer protocol (KIP-848) said running and
// /readyz 200 throughout even after that was fixed, since each rejoin
// assigned it partitions before the drop, and the drop's notice was taken
// for one of an earlier assignment (a user's run). It is not ready,
// naming the cause, whichever protocol came first.
func TestGroupProtocolMixedHint(t *testing.T) {
	for _, first := range []string{"classic", "consumer"} {
		t.Run(first+"-group", func(t *testing.T) {
			other := map[string]string{"classic": "consumer", "consumer": "classic"}[first]
			st := ordersStack(t)
			_, catFlags := localCatalog(t)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			base := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--group", "mix"}, catFlags...)
			done := liveFloe(ctx, append(base, "--group-protocol", first)...)
			// Stopped before the test's folders are removed, which it writes in.
			defer func() {
				cancel()
				<-done
			}()
			time.Sleep(3 * time.Second)
			mctx, mcancel := context.WithTimeout(ctx, 25*time.Second)
			defer mcancel()
			metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
			joined := liveFloe(mctx, append(base, "--group-protocol", other, "--metrics-addr", metricsAddr)...)
			codes := map[int]int{}
			var last string
			for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(200 * time.Millisecond) {
				resp, err := http.Get("http://" + metricsAddr + "/readyz")
				if err != nil {
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				codes[resp.StatusCode]++
				last = string(b)
			}
			mcancel()
			r := <-joined
			if !strings.Contains(r.errs, "may use the other --group-protocol") {
				t.Errorf("the other protocol's member's warnings do not name the cause:\n%s", r.errs)
			}
			// Each rejoin may assign it partitions for a moment (running,
			// ready): a probe may meet one, not most.
			ready, total := codes[http.StatusOK], codes[http.StatusOK]+codes[http.StatusServiceUnavailable]
			if total == 0 || ready*5 > total || !strings.Contains(last, "may use the other --group-protocol") {
				t.Errorf("the %s member of a %s group was ready %d times of %d; last /readyz %s", other, first, ready, total, last)
			}
		})
	}
}
