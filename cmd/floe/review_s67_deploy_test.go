package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/localstack"
)

// TestRESTFlagsIgnoredWarn (deploy review s67): the REST catalog's flags
// (--catalog-token, --catalog-credential, --catalog-oauth2-uri,
// --catalog-scope) given beside a SQLite or PostgreSQL catalog were
// dropped without a word. Each warns now, naming where it was set; beside
// a REST catalog none does.
func TestRESTFlagsIgnoredWarn(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "floe.yaml")
	if err := os.WriteFile(cfgFile, []byte("catalog-scope: lake\ncatalog-oauth2-uri: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLOE_CATALOG_TOKEN", "not-a-secret-in-this-test")
	_, catFlags := localCatalog(t)
	_, _, errs := floe(t, append([]string{"status", "--config", cfgFile, "--catalog-oauth2-uri", "https://idp.example/token"}, catFlags...)...)
	t.Logf("stderr:\n%s", errs)
	for _, want := range []string{
		"--catalog-token (set by FLOE_CATALOG_TOKEN) is an Iceberg REST catalog's setting, and --catalog names a sqlite catalog, which ignores it",
		"--catalog-scope (set by config file " + cfgFile + " line 1) is an Iceberg REST catalog's setting",
		"--catalog-oauth2-uri (set by the command line) is an Iceberg REST catalog's setting",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr does not say %q", want)
		}
	}
	if strings.Contains(errs, "not-a-secret-in-this-test") {
		t.Errorf("the warning shows the token's value")
	}
	if strings.Contains(errs, "--catalog-credential (set by") {
		t.Errorf("a REST flag left unset is warned about")
	}

	// Beside a REST catalog's URL they are its settings: no warning. The
	// URL answers nothing (port 1); only the warnings matter here.
	_, _, errs = floe(t, "status", "--config", cfgFile, "--catalog", "http://127.0.0.1:1/catalog", "--dial-timeout", "1s")
	if strings.Contains(errs, "Iceberg REST catalog's setting") {
		t.Errorf("REST flags beside a REST catalog are warned about:\n%s", errs)
	}
}

// TestTLSAgainstPlaintextResetNamesTLS (deploy review s67): TLS against
// the secured local stack's plaintext port, which resets the connection at
// the TLS hello, read "cannot reach brokers ... (is Kafka running
// there?); check --brokers", though a broker answered there. It names TLS
// now, as the EOF a Kafka listener may answer with did.
func TestTLSAgainstPlaintextResetNamesTLS(t *testing.T) {
	dir := t.TempDir()
	l, _ := upOnFreePorts(t, localstack.UpOptions{Dir: dir, Secure: true})
	t.Cleanup(l.Close)
	_, catFlags := localCatalog(t)
	code, _, errs := floe(t, append([]string{"sink", "--brokers", l.Plaintext, "--kafka-tls-ca", filepath.Join(dir, "tls", "ca.pem"),
		"--dial-timeout", "5s", "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, catFlags...)...)
	line := errorLine(errs)
	t.Logf("exit %d: %s", code, line)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	if !strings.Contains(line, "the brokers do not speak TLS on this port") || !strings.Contains(line, "check --kafka-tls") {
		t.Errorf("the error does not say the port does not speak TLS:\n%s", line)
	}
	if strings.Contains(line, "is Kafka running there") {
		t.Errorf("the error says the broker may be down, where one answered:\n%s", line)
	}
}
