package connector_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
)

// TestDialSilentPort (from a new-user run): --brokers naming a port that
// takes connections and never answers the Kafka protocol (the local
// stack's S3 endpoint or schema registry) waited the dial timeout and
// asked only whether Kafka runs there; it asks whether the port is the
// broker's.
func TestDialSilentPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	defer func() {
		ln.Close()
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case held <- c: // held open, silent
			default:
				c.Close()
			}
		}
	}()
	_, err = connector.Dial(t.Context(), []string{ln.Addr().String()}, time.Second)
	if err == nil || !strings.Contains(err.Error(), "no answer within 1s; is Kafka running there, and is it the broker's port, not another service's (an S3 endpoint, a schema registry)?") {
		t.Fatalf("dial of a silent port: %v", err)
	}
}

// TestDialStoppedWhileWaiting: a dial waiting for brokers that take no
// connection ends when its context does (a signal stopping floe), saying
// so, not that the brokers did not answer in time.
func TestDialStoppedWhileWaiting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused from now on
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = connector.Dial(ctx, []string{addr}, time.Minute)
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "stopped while waiting for brokers "+addr) || took > 5*time.Second {
		t.Fatalf("dial stopped after 500ms: %v after %s", err, took)
	}
}
