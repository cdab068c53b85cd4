package connector

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hangWatch is a franz-go hook noticing brokers that do not answer: their
// requests, or the setup of a new connection (the TLS handshake, the
// first ApiVersions request), time out (RequestTimeoutOverhead, or the
// dial timeout for a TLS handshake). A broker whose process is stopped
// (SIGSTOP, a machine frozen) still has its connections taken by the
// kernel; franz-go retries each request for its RetryTimeout (30 s) before
// the caller hears of it, and says only "i/o timeout" or "unable to dial:
// context deadline exceeded", without the broker. The watch tells within
// one request timeout, naming the broker; any answer from the broker
// clears it.
type hangWatch struct {
	mu   sync.Mutex
	hung map[string]*hang // by the broker's HOST:PORT as its metadata names it
	// fetched is when each broker was last sent a fetch, answered or not,
	// and fetchAnswered when one last answered one: the brokers a sink
	// reads from (its partitions' leaders) are those it fetches from. A
	// broker that leads none of them gets only metadata requests, which
	// franz-go sends to every broker in turn; its hang does not stop the
	// sink, and must not take it out of service (review s68b).
	fetched       map[string]time.Time
	fetchAnswered time.Time
}

// hang is a broker's run of timeouts since its last answer.
type hang struct {
	since, last time.Time
	// waited is how long the last timed-out request waited; cause its
	// error.
	waited time.Duration
	cause  error
	// remote is the address the timed-out connection had, when the error
	// said it ("" otherwise): it tells a session's error of a request to
	// this broker from another component's timeout.
	remote string
}

// OnBrokerConnect implements kgo.HookBrokerConnect; err includes the
// connection's TLS handshake, its SASL authentication and its first
// request (ApiVersions).
func (w *hangWatch) OnBrokerConnect(meta kgo.BrokerMetadata, d time.Duration, _ net.Conn, err error) {
	w.note(meta, d, err)
}

// OnBrokerE2E implements kgo.HookBrokerE2E: the end of every request, its
// answer read or its write or read failed.
func (w *hangWatch) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key == kmsg.Fetch.Int16() {
		w.noteFetch(meta, e.Err() == nil)
	}
	w.note(meta, e.TimeToWrite+e.ReadWait+e.TimeToRead, e.Err())
}

// noteFetch records a fetch sent to the broker of meta, and whether it
// answered.
func (w *hangWatch) noteFetch(meta kgo.BrokerMetadata, answered bool) {
	addr := brokerAddr(meta)
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fetched == nil {
		w.fetched = map[string]time.Time{}
	}
	w.fetched[addr] = now
	if answered {
		w.fetchAnswered = now
	}
}

// note records the end of a connection's setup or of a request to the
// broker of meta: an answer (err nil) clears its hang, a timeout extends
// it. Other errors (a refusal, a connection closed under a request) say
// nothing of whether it answers.
func (w *hangWatch) note(meta kgo.BrokerMetadata, waited time.Duration, err error) {
	addr := brokerAddr(meta)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		delete(w.hung, addr)
		return
	}
	if !timedOut(err) {
		return
	}
	now := time.Now()
	h := w.hung[addr]
	if h == nil {
		if w.hung == nil {
			w.hung = map[string]*hang{}
		}
		h = &hang{since: now}
		w.hung[addr] = h
	}
	h.last, h.waited, h.cause = now, waited, err
	if r := remoteAddr(err); r != "" {
		h.remote = r
	}
}

// brokerAddr is a broker's HOST:PORT as its metadata names it.
func brokerAddr(meta kgo.BrokerMetadata) string {
	return net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
}

// timedOut reports whether err is a timeout: a read or write past its
// deadline, or a dial or handshake past its context's.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// remoteAddr is the remote address of the connection err is an error of,
// "" when it names none.
func remoteAddr(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	return ""
}

// hungBrokers is the brokers that do not answer now: sorted, with the
// earliest since, the longest wait and the latest cause among them. A
// broker whose last timeout is older than window is no longer taken to
// hang: the client stopped asking it (another broker leads its
// partitions now), and it would never answer to clear it. With read set,
// only those that hold a sink up: while some broker answers its fetches,
// the brokers it fetches from.
func (w *hangWatch) hungBrokers(window time.Duration, read bool) (addrs []string, since time.Time, waited time.Duration, cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	// While some broker answers the sink's fetches, only the brokers it
	// fetches from hold it up; while none does (a leader hung before its
	// first fetch went out, say), every broker that does not answer may.
	reading := read && time.Since(w.fetchAnswered) <= window
	for addr, h := range w.hung {
		if time.Since(h.last) > window || reading && time.Since(w.fetched[addr]) > window {
			continue
		}
		addrs = append(addrs, addr)
		if since.IsZero() || h.since.Before(since) {
			since = h.since
		}
		waited = max(waited, h.waited)
		if h.last.After(last) {
			last, cause = h.last, h.cause
		}
	}
	slices.Sort(addrs)
	return addrs, since, waited, cause
}

// hungOn is hungBrokers for err, which ended a session: the brokers that
// do not answer when err is a timeout of a request to one of them (of a
// connection to the address one of them had, or one that names none),
// none otherwise (an object store's or a catalog's timeout).
func (w *hangWatch) hungOn(err error, window time.Duration) (addrs []string, since time.Time, waited time.Duration) {
	if err == nil || !timedOut(err) {
		return nil, time.Time{}, 0
	}
	if _, http := errors.AsType[*url.Error](err); http {
		// An HTTP request's (an object store's, a REST catalog's, a
		// schema registry's): Kafka's protocol is not HTTP. It names no
		// connection when its context ended, and read as the brokers'
		// while one was in its window (found by review s68b).
		return nil, time.Time{}, 0
	}
	addrs, since, waited, _ = w.hungBrokers(window, false)
	if r := remoteAddr(err); r != "" && len(addrs) > 0 {
		w.mu.Lock()
		ours := false
		for _, a := range addrs {
			if h := w.hung[a]; h != nil && (h.remote == r || a == r) {
				ours = true
			}
		}
		w.mu.Unlock()
		if !ours {
			return nil, time.Time{}, 0
		}
	}
	return addrs, since, waited
}

// notAnswering is why brokers that took connections (or whose connections
// stalled) give no answer, for cannotReach: how long a request waited,
// and since when.
func notAnswering(since time.Time, waited time.Duration) string {
	return fmt.Sprintf("not answering: no answer within %s since %s; is Kafka running there, and its process not stopped or overloaded?",
		roundWait(waited), since.Format(time.TimeOnly))
}

// roundWait rounds a request's wait for a message: to the second, or to
// a tenth of one below 10 s.
func roundWait(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// cannotReach is the error naming brokers that take no connection or give
// no answer, why saying which, since when, and what to look at: a
// starting command (DialSecure) and a running sink name them alike.
func cannotReach(brokers []string, why string, err error) error {
	return fmt.Errorf("cannot reach brokers %s (%s): %w", strings.Join(brokers, ","), why, err)
}
