package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryURLCredentialsNotPrinted (from a review): a schema registry
// URL with basic-auth credentials in it (Confluent's
// basic.auth.credentials.source=URL, which Go's HTTP client honours) was
// printed whole in every registry error, the password twice. The
// credentials are taken out of the URL as basic auth; messages show the
// URL without them.
func TestRegistryURLCredentialsNotPrinted(t *testing.T) {
	st, loc := sinkStack(t)
	const secret = "sr-Secret-4d2e77"
	addr := refusedTCPAddr(t)
	code, out, errs := floe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders",
		"--value", "registry", "--schema-registry", "http://sr-user:" + secret + "@" + addr, "--retry-for", "0s", "--stop-at-end"}, loc...)...)
	if code != exitError || strings.Contains(out+errs, secret) || !strings.Contains(errorLine(errs), "schema registry http://"+addr) {
		t.Errorf("exit %d: %s", code, errs)
	}
	// Credentials given twice are refused, without printing them.
	code, _, errs = floe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders",
		"--value", "registry", "--schema-registry", "http://sr-user:" + secret + "@" + addr, "--schema-registry-user", "u", "--stop-at-end"}, loc...)...)
	if code != exitError || strings.Contains(errs, secret) || !strings.Contains(errs, "give them one way") {
		t.Errorf("credentials in the URL and a flag: exit %d: %s", code, errs)
	}
}

// TestConfigFileSecretInYAMLError (from a review): a config file whose
// password starts with '*' (an alias to YAML) failed with yaml's "unknown
// anchor 'PASSWORD' referenced", printing it; one starting with '!' (a
// tag) was read cut short, silently. Both are refused naming the line and
// the fix.
func TestConfigFileSecretInYAMLError(t *testing.T) {
	const secret = "Pw-Secret-7c1f09"
	for lead, want := range map[string]string{
		"*": "line 4: the value starts with '*', which YAML reads as an alias: quote it",
		"!": "line 4: kafka-sasl-password: the value starts with '!', which YAML reads as a tag: quote it",
	} {
		path := filepath.Join(t.TempDir(), "floe.yaml")
		if err := os.WriteFile(path, []byte("brokers: 127.0.0.1:1\nkafka-sasl-mechanism: SCRAM-SHA-512\nkafka-sasl-user: floe\nkafka-sasl-password: "+lead+secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errs := floe(t, "sink", "--config", path, "--topic", "t", "--table", "lake.t")
		if code != exitError || strings.Contains(out+errs, secret) || !strings.Contains(errs, want) {
			t.Errorf("a password starting with %s: exit %d: %s", lead, code, errs)
		}
	}
}

// TestKeywordDSNRefused (from a review): a PostgreSQL connection string in
// libpq's keyword form (host=... password=... dbname=...) was taken for a
// SQLite file's path: floe logged it, password and all, created a catalog
// in a file named after it and sank into that. It is refused, naming the
// URL form, without printing it.
func TestKeywordDSNRefused(t *testing.T) {
	st, _ := sinkStack(t)
	const secret = "Pg-Secret-3e8a51"
	dir := t.TempDir()
	t.Chdir(dir)
	dsn := "host=127.0.0.1 port=1 user=floe password=" + secret + " dbname=iceberg"
	code, out, errs := floe(t, "sink", "--brokers", st.Brokers[0], "--catalog", dsn, "--warehouse", filepath.Join(dir, "wh"),
		"--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	if code != exitError || strings.Contains(out+errs, secret) || !strings.Contains(errs, "give it as a URL: postgres://USER:PASSWORD@HOST:PORT/DBNAME") {
		t.Errorf("exit %d: %s", code, errs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("the refused catalog left %s", entries[0].Name())
	}
}
