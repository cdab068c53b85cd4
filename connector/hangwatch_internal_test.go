package connector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHangWatch: a timeout of a request to a broker marks it not
// answering until it answers; other errors say nothing; a session's
// timeout reads as the broker's only when it is of a connection to it or
// names no connection (review s63: a storage outage must not read as the
// brokers'); a broker not asked again within the window no longer counts.
func TestHangWatch(t *testing.T) {
	var w hangWatch
	meta := kgo.BrokerMetadata{Host: "10.0.0.7", Port: 9092}
	brokerAddr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 9092}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Addr: brokerAddr, Err: os.ErrDeadlineExceeded}
	const window = time.Minute

	w.OnBrokerE2E(meta, 3, kgo.BrokerE2E{ReadErr: errors.New("broken pipe"), ReadWait: time.Second})
	if addrs, _, _, _ := w.hungBrokers(window, false); addrs != nil {
		t.Errorf("a broken connection marks %v not answering", addrs)
	}
	w.OnBrokerE2E(meta, 3, kgo.BrokerE2E{ReadErr: readTimeout, ReadWait: 10 * time.Second})
	addrs, since, waited, cause := w.hungBrokers(window, false)
	if fmt.Sprint(addrs) != "[10.0.0.7:9092]" || since.IsZero() || waited != 10*time.Second || cause != readTimeout {
		t.Errorf("after a read timeout: %v since %v waited %s cause %v", addrs, since, waited, cause)
	}
	// A TLS handshake past the dial timeout names no address.
	w.OnBrokerConnect(kgo.BrokerMetadata{Host: "kafka-2", Port: 9092}, 10*time.Second, nil, fmt.Errorf("unable to dial: %w", context.DeadlineExceeded))
	if addrs, _, _, _ := w.hungBrokers(window, false); fmt.Sprint(addrs) != "[10.0.0.7:9092 kafka-2:9092]" {
		t.Errorf("after a handshake timeout: %v", addrs)
	}

	session := fmt.Errorf("describe topic orders: %w", readTimeout)
	if got, _, _ := w.hungOn(session, window); len(got) != 2 {
		t.Errorf("a session's timeout of a connection to the broker: %v, want both brokers", got)
	}
	s3 := fmt.Errorf("write data file: %w", &net.OpError{Op: "read", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 443}, Err: os.ErrDeadlineExceeded})
	if got, _, _ := w.hungOn(s3, window); got != nil {
		t.Errorf("an object store's timeout reads as brokers %v not answering", got)
	}
	if got, _, _ := w.hungOn(errors.New("connection refused"), window); got != nil {
		t.Errorf("a refusal reads as brokers %v not answering", got)
	}
	if got, _, _ := w.hungOn(fmt.Errorf("unable to dial: %w", context.DeadlineExceeded), window); len(got) != 2 {
		t.Errorf("a timeout naming no connection: %v, want both brokers", got)
	}

	// An answer clears its broker; one not asked again expires.
	w.OnBrokerE2E(meta, 3, kgo.BrokerE2E{})
	if addrs, _, _, _ := w.hungBrokers(window, false); fmt.Sprint(addrs) != "[kafka-2:9092]" {
		t.Errorf("after 10.0.0.7 answered: %v", addrs)
	}
	if addrs, _, _, _ := w.hungBrokers(0, false); addrs != nil {
		t.Errorf("past the window: %v", addrs)
	}
	if got := notAnswering(time.Date(2026, 12, 8, 4, 12, 31, 0, time.UTC), 1049*time.Millisecond); !strings.HasPrefix(got, "not answering: no answer within 1s since 04:12:31; ") {
		t.Errorf("notAnswering: %q", got)
	}
}

// TestHangWatchHoldsUpOnlyWhatTheSinkReads: while another broker answers
// the sink's fetches, a broker that times out but is not fetched from (it
// leads none of the sink's partitions, and gets metadata requests in
// turn) does not hold the sink up, and a sink's readiness must not say it
// does (review s68b); one it fetches from does, and while no fetch is
// answered (a leader hung before its first fetch) every hung broker may.
func TestHangWatchHoldsUpOnlyWhatTheSinkReads(t *testing.T) {
	var w hangWatch
	leader, idle := kgo.BrokerMetadata{Host: "kafka-1", Port: 9092}, kgo.BrokerMetadata{Host: "kafka-2", Port: 9092}
	timeout := fmt.Errorf("read: %w", os.ErrDeadlineExceeded)
	const window = time.Minute
	w.OnBrokerE2E(idle, kmsg.Metadata.Int16(), kgo.BrokerE2E{ReadErr: timeout, ReadWait: time.Second})
	if addrs, _, _, _ := w.hungBrokers(window, true); fmt.Sprint(addrs) != "[kafka-2:9092]" {
		t.Errorf("before any fetch was answered: %v, want the hung broker", addrs)
	}
	w.OnBrokerE2E(leader, kmsg.Fetch.Int16(), kgo.BrokerE2E{})
	if addrs, _, _, _ := w.hungBrokers(window, true); addrs != nil {
		t.Errorf("a hung broker the sink does not fetch from holds it up: %v", addrs)
	}
	if addrs, _, _, _ := w.hungBrokers(window, false); fmt.Sprint(addrs) != "[kafka-2:9092]" {
		t.Errorf("without read, every hung broker: %v", addrs)
	}
	w.OnBrokerE2E(idle, kmsg.Fetch.Int16(), kgo.BrokerE2E{ReadErr: timeout, ReadWait: time.Second})
	if addrs, _, _, _ := w.hungBrokers(window, true); fmt.Sprint(addrs) != "[kafka-2:9092]" {
		t.Errorf("a hung broker the sink fetches from: %v", addrs)
	}
}
