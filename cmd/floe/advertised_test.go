package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/localstack"
)

// advertisedListener listens on a real port but reports another address,
// which kfake advertises in its metadata: a broker whose
// advertised.listeners clients cannot reach (the classic Docker
// misconfiguration: the seed answers, the advertised host does not).
type advertisedListener struct {
	net.Listener
	adv net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.adv }

// TestUnreachableAdvertisedListener (from a review): the seed broker
// answers but advertises an address floe cannot reach (the classic
// advertised.listeners mistake). A group member waited for an assignment
// without a word; a static sink failed naming a port never given. Both
// stop at once naming the advertised address.
func TestUnreachableAdvertisedListener(t *testing.T) {
	t.Run("static", func(t *testing.T) { sinkAdvertising(t, nil) })
	t.Run("group", func(t *testing.T) { sinkAdvertising(t, []string{"--group", "g47"}) })
}

func sinkAdvertising(t *testing.T, extra []string) {
	advertised := refusedTCPAddr(t)
	var (
		mu   sync.Mutex
		real string
	)
	listen := func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		real = ln.Addr().String()
		mu.Unlock()
		a, _ := net.ResolveTCPAddr("tcp", advertised)
		return advertisedListener{Listener: ln, adv: a}, nil
	}
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(), Kfake: []kfake.Opt{kfake.ListenFn(listen), kfake.SeedTopics(1, "orders")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	mu.Lock()
	seed := real
	mu.Unlock()
	_, catFlags := localCatalog(t)
	type result struct {
		code int
		errs string
	}
	done := make(chan result, 1)
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	go func() {
		_, errs, err := floeCtx(ctx, append([]string{"sink", "--brokers", seed, "--topic", "orders", "--table", "lake.orders", "--dial-timeout", "3s", "--retry-for", "0s"}, append(extra, catFlags...)...)...)
		code := 0
		if err != nil {
			code = 2
			errs += "floe: " + err.Error()
		}
		done <- result{code, errs}
	}()
	select {
	case r := <-done:
		line := errorLine(r.errs)
		t.Logf("exit %d after %s: %s", r.code, time.Since(start).Round(time.Millisecond), line)
		if r.code != 2 || !strings.Contains(line, advertised) || !strings.Contains(line, "advertis") {
			t.Errorf("want exit 2 naming the advertised address %s the seed %s sent, got exit %d:\n%s", advertised, seed, r.code, line)
		}
	case <-ctx.Done():
		r := <-done
		t.Fatalf("floe sink still ran 40 s after start (--dial-timeout 3s) against a seed advertising %s; it said:\n%s", advertised, r.errs)
	}
}
