package connector

import (
	"context"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReviewS68bHTTPTimeoutNotBrokers: a session that ends on an object
// store's, a REST catalog's or a schema registry's request timing out
// (an HTTP client's *url.Error wrapping context.DeadlineExceeded, naming
// no connection) while a broker is within its hang window (one that
// leads nothing and hangs, or a leader that let one request pass in the
// last 2 request timeouts + 15 s) read as "brokers X do not answer", and
// once it gave up, as a CheckError of --brokers: the storage outage is
// blamed on Kafka.
func TestReviewS68bHTTPTimeoutNotBrokers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an HTTP endpoint that takes connections and answers nothing
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+ln.Addr().String()+"/warehouse/data/f.parquet", nil)
	_, storageErr := http.DefaultClient.Do(req)
	if storageErr == nil {
		t.Fatal("the silent endpoint answered")
	}

	var w hangWatch
	w.OnBrokerE2E(kgo.BrokerMetadata{Host: "10.0.0.7", Port: 9092}, 3, kgo.BrokerE2E{ReadWait: time.Second,
		ReadErr: &net.OpError{Op: "read", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 9092}, Err: os.ErrDeadlineExceeded}})
	if got, _, _ := w.hungOn(storageErr, time.Minute); got != nil {
		t.Errorf("an HTTP request's timeout (%v) reads as brokers %v not answering", storageErr, got)
	}
}
