//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestLookupWrongPasswordIsAnError (from a new user's run): with the
// brokers set by variables, as a local stack's env.sh sets them, and a
// wrong FLOE_KAFKA_SASL_PASSWORD, floe where and floe as-of answered from
// the table alone and exited 0, warning to pass an empty --brokers so as not to
// wait --dial-timeout, though nothing timed out: that fallback is for
// brokers that cannot be reached. A refused authentication is an error
// naming it and the flags to fix, as a sink's start says it.
func TestLookupWrongPasswordIsAnError(t *testing.T) {
	const topic = "orders"
	c := startSecureCluster(t, false, kfake.User("SCRAM-SHA-512", floeUser, floePass))
	c.topic(t, topic, 1, 10)
	_, catFlags := localCatalog(t)
	mustFloe(t, append(append([]string{"sink", "--topic", topic, "--table", "lake.orders", "--stop-at-end"},
		c.userFlags("SCRAM-SHA-512", floeUser, floePass)...), catFlags...)...)
	t.Setenv("FLOE_BROKERS", c.brokers[0])
	t.Setenv("FLOE_KAFKA_TLS_CA", c.certs.CAFile)
	t.Setenv("FLOE_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
	t.Setenv("FLOE_KAFKA_SASL_USER", floeUser)
	t.Setenv("FLOE_KAFKA_SASL_PASSWORD", "wrong")
	for _, args := range [][]string{
		{"where", "--table", "lake.orders", "--partition", "0", "--offset", "3"},
		{"as-of", "--table", "lake.orders", "--offsets", "0=3"},
	} {
		code, out, errs := floe(t, append(args, catFlags...)...)
		line := errorLine(errs)
		if code != exitError || strings.Contains(errs, "answering from the table alone") ||
			!strings.Contains(line, `authentication as SCRAM-SHA-512 user "floe" failed`) || !strings.Contains(line, "--kafka-sasl-password") {
			t.Errorf("floe %s with a wrong FLOE_KAFKA_SASL_PASSWORD: exit %d, want %d naming the refused authentication\nstdout:\n%s\nstderr:\n%s", args[0], code, exitError, out, errs)
		}
		noSecret(t, out, errs)
	}
}
