package connector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authWatch is a franz-go hook noticing the brokers refusing a consumer's
// connections after they accepted them: its SASL authentication
// (credentials rotated or revoked, seen when a connection is
// re-authenticated or opened again), or a TLS handshake that fails (the
// brokers' certificate expired, or replaced by one of another CA): franz-go
// retries such connections without end, so that a sink would stall
// silently. A Kafka broker answers SASL_AUTHENTICATION_FAILED; some
// (kfake) close the connection during SaslAuthenticate instead. An
// accepted connection clears the refusal.
type authWatch struct {
	// explain classifies a failed connection as Dial does
	// (Security.refusal), so that a running sink names the cause and the
	// fix as a starting one does.
	explain func(error) *CheckError

	mu    sync.Mutex
	since time.Time // first refusal since the last accepted connection
	cause error
	// check is cause as explain classified it; nil for a refused SASL
	// authentication, which authRefused names as rotated credentials.
	check  *CheckError
	logged bool // the refusal since since was logged
	// dialFailed is the first dial that no broker took since the last
	// connection made (zero while connections are made): a sink that
	// gives up then names the brokers, as a starting one does. failed
	// holds the addresses of those dials (dialTarget), so that only an
	// error of a dial to one of them reads as the brokers': a seed that
	// takes no connection fails dials while the cluster answers, and a
	// storage outage then is not theirs (found by review s63).
	dialFailed time.Time
	failed     map[string]bool
}

// OnBrokerConnect implements kgo.HookBrokerConnect; err includes the
// connection's TLS handshake and SASL authentication.
func (w *authWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.since, w.cause, w.check, w.logged, w.dialFailed, w.failed = time.Time{}, nil, nil, false, time.Time{}, nil
	case unreachable(err):
		if w.dialFailed.IsZero() {
			w.dialFailed = time.Now()
		}
		if t := dialTarget(err); t != "" {
			if w.failed == nil {
				w.failed = map[string]bool{}
			}
			w.failed[t] = true
		}
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		w.refused(err, nil)
	default:
		if c := w.explain(err); c != nil {
			w.refused(err, c)
		}
	}
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (w *authWatch) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if err := e.Err(); key == int16(kmsg.SASLAuthenticate) && err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.refused(fmt.Errorf("the broker closed the connection during SASL authentication: %w", err), nil)
	}
}

func (w *authWatch) refused(err error, check *CheckError) {
	if w.since.IsZero() {
		w.since = time.Now()
	}
	w.cause, w.check = err, check
}

// refusal is when the current refusal began (zero when there is none),
// its latest cause and classification, and whether it is the first call
// to see it.
func (w *authWatch) refusal() (since time.Time, cause error, check *CheckError, first bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	first = !w.since.IsZero() && !w.logged
	if first {
		w.logged = true
	}
	return w.since, w.cause, w.check, first
}

// unreachableSince is when the brokers stopped taking connections: the
// first failed dial since the last connection made, zero while
// connections are made or when err is not a failed dial to one of the
// brokers since then (an object store's or a catalog's).
func (w *authWatch) unreachableSince(err error) time.Time {
	t := dialTarget(err)
	w.mu.Lock()
	defer w.mu.Unlock()
	if t == "" || !w.failed[t] {
		return time.Time{}
	}
	return w.dialFailed
}

// dialTarget names the address of the failed dial err is, or "" when it
// is none: its resolved address, or the host name that did not resolve.
func dialTarget(err error) string {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return ""
	}
	if op.Addr != nil {
		return op.Addr.String()
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok && dns.Name != "" {
		return "name " + dns.Name
	}
	return ""
}

// refusing reports whether the brokers refuse the connections now.
func (w *authWatch) refusing() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.since.IsZero()
}

// saslRefusal is the cause of the brokers' refusing the connections' SASL
// authentication now, nil when they do not.
func (w *authWatch) saslRefusal() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.since.IsZero() || w.check != nil {
		return nil
	}
	return w.cause
}

// watchAuth is ctx, cancelled with authRefused's error once it has one
// (the sink's requests would otherwise wait on the refused connections
// without end), and the function that stops the watch. While a refusal
// lasts, or brokers do not answer (Broker.hungBrokers), the pipeline
// reads as retrying (Config.OnRetry, with the error), and as running
// again once a connection is accepted and the brokers answer
// (Config.OnSession): the sink reads nothing meanwhile. A hang does not
// end the session: franz-go retries its requests, and one that answers
// again within them loses nothing; the session ends when a request has
// kept failing for franz-go's RetryTimeout.
func (s *Sink) watchAuth(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	tick := time.NewTicker(time.Second)
	go func() {
		defer tick.Stop()
		failing := false
		var hung error
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				err, refused := s.authRefused()
				if err != nil {
					cancel(err)
					return
				}
				hung = s.logHung(hung)
				fails := refused
				if fails == nil {
					fails = hung
				}
				switch {
				case fails != nil && !failing && s.cfg.OnRetry != nil:
					s.cfg.OnRetry(fails, time.Second)
				case fails == nil && failing && s.cfg.OnSession != nil:
					s.cfg.OnSession()
				}
				failing = fails != nil
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}

// logHung returns the error naming the brokers that do not answer now
// (nil when all do), logging a WARN line when they stop answering and an
// INFO line when they answer again; was is its last result.
func (s *Sink) logHung(was error) error {
	hung := s.broker.hungBrokers()
	switch {
	case hung != nil && was == nil:
		s.log.Warn("a broker does not answer: nothing is read from it until it does, and the pipeline reads as retrying (/readyz 503); the sink goes on once it answers, or gives up after retrying for gives_up_after",
			"err", hung, "gives_up_after", s.cfg.RetryFor)
	case hung == nil && was != nil:
		s.log.Info("the brokers answer again")
	}
	return hung
}

// authRefused logs one ERROR line when the brokers start refusing the
// sink's connections (SASL authentication or TLS handshake), and returns
// the refusal, named with its fix, while it lasts. Once they have refused
// it for Config.RetryFor (at once with a negative RetryFor, which never
// retries) it returns as err a CheckError naming the settings to fix.
func (s *Sink) authRefused() (err, refused error) {
	since, cause, check, first := s.broker.auth.refusal()
	if since.IsZero() {
		return nil, nil
	}
	if check != nil {
		return s.connRefused(since, cause, check, first)
	}
	who := s.saslWho()
	refused = s.saslRefused(cause)
	if first {
		s.log.Error("the brokers refuse SASL authentication as "+who+" (credentials rotated or revoked?); no record is read until it is accepted: restart floe with the new SASL user and password",
			"err", cause, "gives_up_after", s.cfg.RetryFor)
	}
	if s.cfg.RetryFor > 0 && time.Since(since) < s.cfg.RetryFor {
		return nil, refused
	}
	return &CheckError{Settings: []Setting{SettingUser, SettingPassword},
		Err: fmt.Errorf("the brokers have refused SASL authentication as %s for %s (credentials rotated or revoked?): %w", who, s.cfg.RetryFor, cause)}, refused
}

// saslWho names the sink's SASL identity as the brokers know it.
func (s *Sink) saslWho() string {
	if s.broker.principal != "" {
		return s.broker.principal
	}
	return "the configured SASL credentials"
}

// saslRefused is the error of a running sink whose SASL authentication
// the brokers refuse, cause the connection's error.
func (s *Sink) saslRefused(cause error) *CheckError {
	return &CheckError{Settings: []Setting{SettingUser, SettingPassword},
		Err: fmt.Errorf("the brokers refuse SASL authentication as %s (credentials rotated or revoked?): %w", s.saslWho(), cause)}
}

// connRefused is authRefused for a connection refused other than by a
// SASL refusal (a certificate, the brokers' or floe's), check naming
// cause as Dial names it.
func (s *Sink) connRefused(since time.Time, cause error, check *CheckError, first bool) (err, refused error) {
	if first {
		// The classification without the library's error, which "err"
		// holds.
		what := strings.TrimSuffix(check.Error(), ": "+cause.Error())
		s.log.Error("the brokers' connections fail: "+what+"; no record is read until one succeeds: fix the certificate on the brokers, or restart floe with the TLS settings that match it",
			"err", cause, "gives_up_after", s.cfg.RetryFor)
	}
	if s.cfg.RetryFor > 0 && time.Since(since) < s.cfg.RetryFor {
		return nil, check
	}
	return refusedFor(s.broker.Seeds, s.cfg.RetryFor, check), check
}

// refusedFor is the error a sink stops with once the brokers' connections
// have failed as check says for retryFor (none when negative): check's
// message and settings, with how long it was retried.
func refusedFor(seeds []string, retryFor time.Duration, check *CheckError) error {
	err := fmt.Errorf("brokers %s: %w", strings.Join(seeds, ","), check.Err)
	if retryFor > 0 {
		err = fmt.Errorf("gave up after retrying for %s: %w", retryFor, err)
	}
	return &CheckError{Settings: check.Settings, Err: err}
}
