package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/floe-dev/floe/localstack"
)

// testCA is a test CA that keeps its key, to sign certificates of any
// validity.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T, dir, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+"-ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return testCA{cert: cert, key: key, file: file}
}

// leaf signs a certificate for 127.0.0.1 valid in [notBefore, notAfter)
// and writes it and its key; it returns the two files.
func (ca testCA) leaf(t *testing.T, dir, name string, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// tlsBroker starts a kfake broker serving serverCert over TLS, requiring a
// client certificate of ca when mutual.
func tlsBroker(t *testing.T, ca testCA, serverCert, serverKey string, mutual bool) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(serverCert, serverKey)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if mutual {
		tc.ClientCAs = x509.NewCertPool()
		tc.ClientCAs.AddCert(ca.cert)
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir(), Kfake: []kfake.Opt{kfake.TLS(tc)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st.Brokers[0]
}

// TestExpiredCertificates (from a review): an expired certificate, the
// brokers' or floe's own (mutual TLS), is named as expired, with the fix:
// floe's certificate flag for its own, the brokers' (or the clock) for
// theirs, where the errors named a CA or server name to check, or asked
// whether Kafka ran there; a client certificate of a CA the brokers do not
// accept is named so, not as missing.
func TestExpiredCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "good")
	other := newTestCA(t, dir, "other")
	now := time.Now()
	validCert, validKey := ca.leaf(t, dir, "valid", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	expiredCert, expiredKey := ca.leaf(t, dir, "expired", now.AddDate(-1, 0, 0), now.Add(-time.Hour))
	otherCert, otherKey := other.leaf(t, dir, "othercert", now.Add(-time.Hour), now.AddDate(1, 0, 0))

	mutual := tlsBroker(t, ca, validCert, validKey, true)
	expiredBroker := tlsBroker(t, ca, expiredCert, expiredKey, false)

	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"client certificate expired", []string{"--brokers", mutual, "--kafka-tls-ca", ca.file, "--kafka-tls-cert", expiredCert, "--kafka-tls-key", expiredKey},
			[]string{"expired", "--kafka-tls-cert"}},
		{"client certificate of another CA", []string{"--brokers", mutual, "--kafka-tls-ca", ca.file, "--kafka-tls-cert", otherCert, "--kafka-tls-key", otherKey},
			[]string{"signed by none of them", "--kafka-tls-cert"}},
		{"broker certificate expired", []string{"--brokers", expiredBroker, "--kafka-tls-ca", ca.file},
			[]string{"expired"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, catFlags := localCatalog(t)
			args := append(append([]string{"sink", "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--dial-timeout", "5s"}, catFlags...), tc.flags...)
			start := time.Now()
			code, _, errs := floe(t, args...)
			line := errorLine(errs)
			t.Logf("exit %d after %s: %s", code, time.Since(start).Round(time.Millisecond), line)
			ok := code == 2
			for _, w := range tc.want {
				ok = ok && strings.Contains(line, w)
			}
			if strings.Contains(line, "is Kafka running there") || strings.HasSuffix(line, "; check") || (strings.Contains(tc.name, "broker certificate expired") && strings.Contains(line, "check --kafka-tls-ca and --kafka-tls-server-name")) {
				ok = false
			}
			if !ok {
				t.Errorf("want exit 2 with %q and the right fix, got exit %d:\n%s", tc.want, code, line)
			}
		})
	}
}

// TestEncryptedClientKey (from a review): a client properties file whose
// ssl.key.location is an encrypted private key, with its ssl.key.password:
// floe said the certificate did not match the key; it says encrypted keys
// are not read and how to decrypt one.
func TestEncryptedClientKey(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "good")
	now := time.Now()
	certFile, keyFile := ca.leaf(t, dir, "client", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	raw, _ := os.ReadFile(keyFile)
	blk, _ := pem.Decode(raw)
	//lint:ignore SA1019 legacy encrypted PEM, as openssl writes with -des3
	enc, err := x509.EncryptPEMBlock(rand.Reader, "PRIVATE KEY", blk.Bytes, []byte("keypass"), x509.PEMCipherAES256)
	if err != nil {
		t.Fatal(err)
	}
	encFile := filepath.Join(dir, "client-key-enc.pem")
	if err := os.WriteFile(encFile, pem.EncodeToMemory(enc), 0o600); err != nil {
		t.Fatal(err)
	}
	props := filepath.Join(dir, "client.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SSL\nssl.ca.location="+ca.file+"\nssl.certificate.location="+certFile+
		"\nssl.key.location="+encFile+"\nssl.key.password=keypass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, catFlags := localCatalog(t)
	code, _, errs := floe(t, append([]string{"sink", "--brokers", "127.0.0.1:1", "--kafka-config", props, "--topic", "t", "--table", "lake.t"}, catFlags...)...)
	line := errorLine(errs)
	t.Logf("exit %d: %s", code, line)
	if !strings.Contains(line, "floe does not read encrypted keys") || !strings.Contains(line, "openssl pkey") {
		t.Errorf("the error does not say the key is encrypted (ssl.key.password is ignored):\n%s", line)
	}
}

// TestClientKeyFileErrorsNameTheKey (deploy review s67): a mutual-TLS key
// file that is missing, holds no key, or was switched with the certificate
// was reported as the certificate's ("--kafka-tls-cert cert.pem: want a
// PEM client certificate matching the key ... (no such file or
// directory)"): the error now names the file at fault.
func TestClientKeyFileErrorsNameTheKey(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "good")
	now := time.Now()
	certFile, keyFile := ca.leaf(t, dir, "client", now.Add(-time.Hour), now.AddDate(1, 0, 0))
	missing := filepath.Join(dir, "absent-key.pem")
	_, catFlags := localCatalog(t)
	for _, tc := range []struct {
		name, cert, key string
		want            []string
	}{
		{"missing key", certFile, missing, []string{`--kafka-tls-key "` + missing + `"`, "no such file"}},
		{"certificate as key", certFile, certFile, []string{`--kafka-tls-key "` + certFile + `"`, "a PEM private key (it holds none)"}},
		{"key as certificate", keyFile, keyFile, []string{`--kafka-tls-cert "` + keyFile + `"`, "a PEM client certificate (it holds none)"}},
		{"switched", keyFile, certFile, []string{`--kafka-tls-cert "` + keyFile + `"`, "the two files are switched"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := floe(t, append([]string{"sink", "--brokers", "127.0.0.1:1", "--kafka-tls-ca", ca.file,
				"--kafka-tls-cert", tc.cert, "--kafka-tls-key", tc.key, "--topic", "t", "--table", "lake.t"}, catFlags...)...)
			line := errorLine(errs)
			t.Logf("exit %d: %s", code, line)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("the error does not say %q:\n%s", w, line)
				}
			}
		})
	}
}
