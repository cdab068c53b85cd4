package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGroupClassicMemberInConsumerGroupNotReady: a member of the classic
// --group-protocol joining a group whose members speak the consumer one
// (KIP-848) sinks nothing, and the group keeps dropping it; its /readyz
// said 200 and /healthz running throughout (a user's run: each rejoin
// assigned it partitions before the drop, so the drop's notice was taken
// for one of an earlier assignment). It is not ready, naming the cause.
func TestGroupClassicMemberInConsumerGroupNotReady(t *testing.T) {
	st := ordersStack(t)
	_, catFlags := localCatalog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	base := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--group", "mix"}, catFlags...)
	done := liveFloe(ctx, append(base, "--group-protocol", "consumer")...)
	defer func() {
		cancel()
		<-done
	}()
	time.Sleep(3 * time.Second)
	mctx, mcancel := context.WithTimeout(ctx, 25*time.Second)
	defer mcancel()
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	classic := liveFloe(mctx, append(base, "--metrics-addr", metricsAddr)...)
	states := map[string]int{}
	var last string
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + metricsAddr + "/readyz")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		states[fmt.Sprint(resp.StatusCode)]++
		last = string(b)
	}
	mcancel()
	r := <-classic
	t.Logf("readyz codes %v; last %s", states, last)
	// Each rejoin assigns it partitions for a moment (running, ready):
	// a probe may meet one, not most.
	if total := states["200"] + states["503"]; total == 0 || states["200"]*5 > total || !strings.Contains(last, "may use the other --group-protocol") {
		t.Errorf("the classic member of a consumer-protocol group was ready %d times of %d, last %s\n%s", states["200"], total, last, r.errs)
	}
}
