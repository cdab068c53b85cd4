//go:build linux

package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/localstack"
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

// TestOtherSecretFlagsWarn (from a new user's run): the schema registry's
// password, the S3 secret key and a catalog URI with its password went
// on the command line without a word, where --kafka-sasl-password warned
// that ps shows it. Each warns once, naming its variable, the config
// file's key and any other place to give it, and never the secret; a URI
// without a password, the local stack's published S3 key and the
// variables do not warn.
func TestOtherSecretFlagsWarn(t *testing.T) {
	const secret = "flag-Secret-5d5d"
	_, catFlags := localCatalog(t)
	audit := append([]string{"audit", "--table", "lake.none"}, catFlags...)
	status := append([]string{"status"}, catFlags...)
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(slices.Clone(audit), "--schema-registry", "http://127.0.0.1:1", "--schema-registry-user", "u", "--schema-registry-password", secret),
			"--schema-registry-password on the command line is in the process list (ps) for any user of this host: set FLOE_SCHEMA_REGISTRY_PASSWORD, or schema-registry-password: in the --config file, instead"},
		{append(slices.Clone(audit), "--schema-registry", "https://key:"+secret+"@127.0.0.1:1"),
			"--schema-registry on the command line holds a password, which is in the process list (ps) for any user of this host: set FLOE_SCHEMA_REGISTRY, or schema-registry: in the --config file, or the password alone as FLOE_SCHEMA_REGISTRY_PASSWORD, instead"},
		{append(slices.Clone(status), "--s3-access-key-id", "k", "--s3-secret-access-key", secret),
			"--s3-secret-access-key on the command line is in the process list (ps) for any user of this host: set FLOE_S3_SECRET_ACCESS_KEY, or s3-secret-access-key: in the --config file, or leave the --s3-* key flags out for the AWS credential chain (AWS_SECRET_ACCESS_KEY, a profile in ~/.aws/credentials), instead"},
		{[]string{"status", "--catalog", "postgres://floe:" + secret + "@127.0.0.1:1/floe?connect_timeout=1"},
			"--catalog on the command line holds a password, which is in the process list (ps) for any user of this host: set FLOE_CATALOG, or catalog: in the --config file, instead"},
	} {
		_, out, errs := floe(t, c.args...)
		if n := strings.Count(errs, "in the process list (ps)"); n != 1 || !strings.Contains(errs, c.want) || strings.Contains(out+errs, secret) {
			t.Errorf("floe %s: %d warnings, want 1 saying\n%s\nwithout the secret; got:\n%s", strings.Join(c.args, " "), n, c.want, errs)
		}
	}
	for _, args := range [][]string{
		append(slices.Clone(status), "--s3-access-key-id", localstack.AccessKeyID, "--s3-secret-access-key", localstack.SecretAccessKey),
		append(slices.Clone(audit), "--schema-registry", "http://127.0.0.1:1"),
	} {
		if _, _, errs := floe(t, args...); strings.Contains(errs, "in the process list (ps)") {
			t.Errorf("floe %s warns of a secret on the command line, where it gives none:\n%s", strings.Join(args, " "), errs)
		}
	}
	t.Setenv("FLOE_S3_SECRET_ACCESS_KEY", secret)
	t.Setenv("FLOE_SCHEMA_REGISTRY_PASSWORD", secret)
	if _, _, errs := floe(t, append(slices.Clone(audit), "--s3-access-key-id", "k", "--schema-registry", "http://127.0.0.1:1", "--schema-registry-user", "u")...); strings.Contains(errs, "in the process list (ps)") || strings.Contains(errs, secret) {
		t.Errorf("the secrets' variables warn as their flags do, or print the secret:\n%s", errs)
	}
}
