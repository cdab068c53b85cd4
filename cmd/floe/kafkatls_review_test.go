package main

import (
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
)

// TestKafkaTLSFlagKeepsFileCA (from a review): docs/secured-kafka.md
// says "a flag, its variable or its config-file key overrides the file".
// Before 4a792a3, a properties file without security.protocol (or with
// SASL_PLAINTEXT) but naming ssl.ca.location, given with --kafka-tls (or
// FLOE_KAFKA_TLS=true, or kafka-tls: true in --config), connected over TLS
// trusting the file's CA. Now the file's ssl.* are read only when the
// file's own protocol is SSL: the flag turns TLS on, but the CA is dropped
// without a word, and the handshake fails against the private CA
// ("signed by a CA floe does not trust ... check --kafka-tls-ca").
func TestKafkaTLSFlagKeepsFileCA(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	for name, body := range map[string]string{
		"no security.protocol":            "bootstrap.servers=b:9093\nssl.ca.location=" + ca + "\n",
		"SASL_PLAINTEXT made TLS by flag": "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=u\nsasl.password=p\nssl.ca.location=" + ca + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			props := filepath.Join(t.TempDir(), "client.properties")
			writeFile(t, props, body)
			var f kafkaSecurityFlags
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			f.register(fs)
			if err := fs.Parse([]string{"--kafka-config", props, "--kafka-tls"}); err != nil {
				t.Fatal(err)
			}
			sec, err := f.security(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if !sec.TLS || sec.TLSCAFile != ca {
				t.Errorf("--kafka-tls over a file naming ssl.ca.location=%s: TLS %v, CA file %q; want TLS trusting the file's CA (as before 4a792a3)", ca, sec.TLS, sec.TLSCAFile)
			}
		})
	}
}
