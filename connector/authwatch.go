package connector

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authWatch is a franz-go hook noticing the brokers refusing a consumer's
// SASL authentication after they accepted it (credentials rotated or
// revoked, seen when a connection is re-authenticated or opened again):
// franz-go retries such connections without end, so that a sink would
// stall silently. A Kafka broker answers SASL_AUTHENTICATION_FAILED; some
// (kfake) close the connection during SaslAuthenticate instead. An
// accepted connection clears the refusal.
type authWatch struct {
	mu     sync.Mutex
	since  time.Time // first refusal since the last accepted connection
	cause  error
	logged bool // the refusal since since was logged
}

// OnBrokerConnect implements kgo.HookBrokerConnect; err includes the
// connection's SASL authentication.
func (w *authWatch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.since, w.cause, w.logged = time.Time{}, nil, false
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		w.refused(err)
	}
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (w *authWatch) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if err := e.Err(); key == int16(kmsg.SASLAuthenticate) && err != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.refused(fmt.Errorf("the broker closed the connection during SASL authentication: %w", err))
	}
}

func (w *authWatch) refused(err error) {
	if w.since.IsZero() {
		w.since = time.Now()
	}
	w.cause = err
}

// refusal is when the current refusal began (zero when there is none),
// its latest cause, and whether it is the first call to see it.
func (w *authWatch) refusal() (since time.Time, cause error, first bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	first = !w.since.IsZero() && !w.logged
	if first {
		w.logged = true
	}
	return w.since, w.cause, first
}

// watchAuth is ctx, cancelled with authRefused's error once it has one
// (the sink's requests would otherwise wait on the refused connections
// without end), and the function that stops the watch.
func (s *Sink) watchAuth(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	tick := time.NewTicker(time.Second)
	go func() {
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if err := s.authRefused(); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}

// authRefused logs one ERROR line when the brokers start refusing the
// sink's SASL authentication and, once they have refused it for
// Config.RetryFor, returns a CheckError naming the user and password
// settings (at once with a negative RetryFor, which never retries).
func (s *Sink) authRefused() error {
	since, cause, first := s.broker.auth.refusal()
	if since.IsZero() {
		return nil
	}
	who := "the configured SASL credentials"
	if s.broker.principal != "" {
		who = s.broker.principal
	}
	if first {
		s.log.Error("the brokers refuse SASL authentication as "+who+" (credentials rotated or revoked?); no record is read until it is accepted: restart floe with the new SASL user and password",
			"err", cause, "gives_up_after", s.cfg.RetryFor)
	}
	if s.cfg.RetryFor > 0 && time.Since(since) < s.cfg.RetryFor {
		return nil
	}
	return &CheckError{Settings: []Setting{SettingUser, SettingPassword},
		Err: fmt.Errorf("the brokers have refused SASL authentication as %s for %s (credentials rotated or revoked?): %w", who, s.cfg.RetryFor, cause)}
}
