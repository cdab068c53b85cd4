package localstack

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Certs are a certificate authority and a certificate it signed, as PEM
// files: what a secured broker serves and its clients trust. The
// certificate serves as both a server and a client certificate (mutual
// TLS).
type Certs struct {
	// CAFile is the CA's certificate, for clients' trust stores.
	CAFile string
	// CertFile and KeyFile are the signed certificate and its key.
	CertFile, KeyFile string
}

// WriteCerts creates, in dir, a new CA (ca.pem) and a certificate signed
// by it for hosts (IP addresses or DNS names) with its key (cert.pem,
// key.pem). The CA's key is not kept: nothing else can be signed by it.
func WriteCerts(dir string, hosts ...string) (Certs, error) {
	c := Certs{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	if len(hosts) == 0 {
		return c, errors.New("certificates: no host to certify")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "floe local CA " + now.UTC().Format(time.RFC3339)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	for path, block := range map[string]*pem.Block{
		c.CAFile:   {Type: "CERTIFICATE", Bytes: caDER},
		c.CertFile: {Type: "CERTIFICATE", Bytes: leafDER},
		c.KeyFile:  {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return c, fmt.Errorf("certificates: %w", err)
		}
	}
	return c, nil
}

// ServerTLS is the TLS configuration of a broker serving c. With
// requireClientCert, clients must present a certificate signed by c's CA
// (mutual TLS).
func (c Certs) ServerTLS(requireClientCert bool) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("broker certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if requireClientCert {
		pemCA, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("broker certificate: %w", err)
		}
		tc.ClientCAs = x509.NewCertPool()
		tc.ClientCAs.AppendCertsFromPEM(pemCA)
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// SecureUser is the SCRAM-SHA-512 superuser of a secured local stack.
const SecureUser = "floe"

// secureKfake is what secures a local stack's broker: TLS with the
// certificates in dir (created on first use, kept across restarts so that
// configured clients keep trusting the broker) and SCRAM-SHA-512 with
// SecureUser, whose password is in dir/password (made on first use).
func secureKfake(dir string) ([]kfake.Opt, Certs, string, error) {
	certs := Certs{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	if _, err := os.Stat(certs.CertFile); errors.Is(err, os.ErrNotExist) {
		if certs, err = WriteCerts(dir, "127.0.0.1", "localhost"); err != nil {
			return nil, certs, "", err
		}
	}
	pwFile := filepath.Join(dir, "password")
	pw, err := os.ReadFile(pwFile)
	if errors.Is(err, os.ErrNotExist) {
		b := make([]byte, 16)
		_, _ = rand.Read(b) // crypto/rand.Read never fails
		pw = []byte(hex.EncodeToString(b))
		err = os.WriteFile(pwFile, pw, 0o600)
	}
	if err != nil {
		return nil, certs, "", fmt.Errorf("broker password: %w", err)
	}
	tc, err := certs.ServerTLS(false)
	if err != nil {
		return nil, certs, "", err
	}
	return []kfake.Opt{kfake.TLS(tc), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", SecureUser, string(pw))}, certs, string(pw), nil
}

// forgetStaleUsers removes the broker's persisted SASL users in kafkaDir
// when they do not let SecureUser in with password. kfake loads them over
// its Superuser option, so a folder first served without --secure (whose
// user list is empty) or whose password file was deleted would refuse
// every login. Without the file the broker starts with SecureUser alone;
// users added on the broker since are gone, and nothing else is touched.
func forgetStaleUsers(kafkaDir, password string) error {
	file := filepath.Join(kafkaDir, "sasl.json")
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker users: %w", err)
	}
	var users struct {
		Scram512 map[string]struct {
			Salt       []byte `json:"salt"`
			SaltedPass []byte `json:"salted_pass"`
			Iterations int    `json:"iterations"`
		} `json:"scram512"`
	}
	if err := json.Unmarshal(b, &users); err != nil {
		return fmt.Errorf("broker users %s: %w", file, err)
	}
	if u, ok := users.Scram512[SecureUser]; ok && u.Iterations > 0 {
		salted, err := pbkdf2.Key(sha512.New, password, u.Salt, u.Iterations, sha512.Size)
		if err == nil && bytes.Equal(salted, u.SaltedPass) {
			return nil
		}
	}
	if err := os.Remove(file); err != nil {
		return fmt.Errorf("broker users: %w", err)
	}
	return nil
}
