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
	catFlags := wrongPassword(t)
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

// wrongPassword sinks 10 records of topic orders of a secured broker into
// lake.orders and sets the FLOE_* variables of that broker with a wrong
// FLOE_KAFKA_SASL_PASSWORD; it returns the catalog's flags.
func wrongPassword(t *testing.T) []string {
	t.Helper()
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
	return catFlags
}

// TestStatusBrokersSideUnknown (from a new user's run): floe status with
// a wrong FLOE_KAFKA_SASL_PASSWORD exited 2 but printed "-" in LAG and
// LOST, where "-" in LOST means no offset lost: unknown read as none. The
// brokers' columns say "?" where their side is not known, there and
// without brokers, and numbers with them.
func TestStatusBrokersSideUnknown(t *testing.T) {
	catFlags := wrongPassword(t)
	// The partition's line: its columns from TOPIC to LAST COMMIT.
	row := func(out string) []string {
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "orders" {
				return f
			}
		}
		return nil
	}
	status := append([]string{"status", "--table", "lake.orders"}, catFlags...)
	code, out, errs := floe(t, status...)
	if f := row(out); code != exitError || len(f) != 9 || f[2] != "?" || f[3] != "?" || f[5] != "?" || f[6] != "?" || f[4] != "10" ||
		!strings.Contains(errorLine(errs), `authentication as SCRAM-SHA-512 user "floe" failed`) {
		t.Errorf("floe status with a wrong password: exit %d, partition %q, want exit 2, \"?\" in LOG START, END OFFSET, LAG and LOST\n%s%s", code, f, out, errs)
	}
	code, out, errs = floe(t, append(status, "--brokers", "")...)
	if f := row(out); code != exitOK || len(f) != 9 || f[2] != "?" || f[3] != "?" || f[5] != "?" || f[6] != "?" {
		t.Errorf("floe status --brokers '': exit %d, partition %q, want \"?\" in LOG START, END OFFSET, LAG and LOST\n%s%s", code, f, out, errs)
	}
	t.Setenv("FLOE_KAFKA_SASL_PASSWORD", floePass)
	code, out, errs = floe(t, status...)
	if f := row(out); code != exitOK || len(f) != 9 || f[2] != "0" || f[3] != "10" || f[5] != "0" || f[6] != "-" {
		t.Errorf("floe status with the brokers: exit %d, partition %q, want 0, 10, lag 0 and no loss (-)\n%s%s", code, f, out, errs)
	}
}

// TestPasswordFlagWarns (from a new user's run): --kafka-sasl-password on
// the command line, which any user of the host reads in ps, went without
// a word although the docs advise against it. It warns once, naming the
// variable and the config file's key, and never the password; the
// variable does not warn.
func TestPasswordFlagWarns(t *testing.T) {
	const pass = "flag-Secret-3c3c"
	_, catFlags := localCatalog(t)
	const warning = "--kafka-sasl-password on the command line is in the process list (ps)"
	_, out, errs := floe(t, append([]string{"status", "--kafka-sasl-password", pass}, catFlags...)...)
	if n := strings.Count(errs, warning); n != 1 || !strings.Contains(errs, "set FLOE_KAFKA_SASL_PASSWORD, or kafka-sasl-password: in the --config file, instead") ||
		strings.Contains(out+errs, pass) {
		t.Errorf("--kafka-sasl-password on the command line: %d warnings, want 1 naming the variable and the config key, without the password:\n%s", n, errs)
	}
	t.Setenv("FLOE_KAFKA_SASL_PASSWORD", pass)
	if _, out, errs := floe(t, append([]string{"status"}, catFlags...)...); strings.Contains(errs, warning) || strings.Contains(out+errs, pass) {
		t.Errorf("FLOE_KAFKA_SASL_PASSWORD warns as the flag does, or prints the password:\n%s", errs)
	}
}
