package catalog_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
)

// TestIsTransientBrokerClosedConnection: a broker that closes the
// connection as soon as a request arrives (restarting, or a proxy or load
// balancer dropping it) makes franz-go give up with its first-read EOF,
// which it does not retry itself because the same symptom at start means
// missing SASL. For a sink that is already running (the start checks the
// brokers first) it is a transient broker error, to retry from the ledger;
// it used to end the sink (exit 2) in the fault campaign's broker scenario.
func TestIsTransientBrokerClosedConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// Read the request, then hang up without an answer.
			_, _ = c.Read(make([]byte, 64))
			c.Close()
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.Addr().String()), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).ListEndOffsets(ctx, "events")
	if !errors.Is(err, io.EOF) {
		t.Fatalf("want a connection closed by the broker, got %v", err)
	}
	if !catalog.IsTransient(err) {
		t.Errorf("IsTransient(%v) = false, want true", err)
	}
}
