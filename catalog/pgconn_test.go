package catalog_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/testenv"
)

// TestPostgresPooledConnectionReused (from a review): checkOpen keeps a
// healthy pooled connection. It took one for open only when syscall.Read
// answered EAGAIN with n == 0, where it answers n == -1: every reuse
// dropped the connection and dialled a new one (TCP, authentication, TLS),
// 200 queries took 7.7 s instead of 0.13 s. The pauses cover the read
// deadline pgdriver leaves on a connection (now + its 10 s read timeout, or
// the last query's context deadline): once it passed, Go's poller failed
// the check's read without looking at the socket.
func TestPostgresPooledConnectionReused(t *testing.T) {
	pg := testenv.Postgres(t)
	db, err := sql.Open("floe-pg", pg.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	pid := func(ctx context.Context) int {
		t.Helper()
		var p int
		if err := db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("at once", func(t *testing.T) {
		first := pid(t.Context())
		if again := pid(t.Context()); again != first {
			t.Errorf("a healthy pooled connection was replaced: backend %d, then %d", first, again)
		}
	})
	t.Run("context deadline passed", func(t *testing.T) {
		first := pid(t.Context())
		// An Exec leaves its context's deadline as the read deadline.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		if _, err := db.ExecContext(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		cancel()
		time.Sleep(2500 * time.Millisecond)
		if again := pid(t.Context()); again != first {
			t.Errorf("a healthy idle connection was replaced: backend %d, then %d", first, again)
		}
	})
	t.Run("read timeout passed", func(t *testing.T) {
		first := pid(t.Context())
		time.Sleep(11 * time.Second) // pgdriver's default ReadTimeout is 10 s
		if again := pid(t.Context()); again != first {
			t.Errorf("a healthy connection idle for 11 s was replaced: backend %d, then %d", first, again)
		}
	})
}

// TestPostgresPooledConnectionReusedOverTLSAndSocket (from a review):
// as TestPostgresPooledConnectionReused, over TLS (TLS 1.3: the raw-socket
// peek under crypto/tls must not take the session's records for a
// goodbye) and over a unix socket.
func TestPostgresPooledConnectionReusedOverTLSAndSocket(t *testing.T) {
	pg := testenv.Postgres(t)
	enableSSL(t, pg)
	tlsURI := strings.Replace(pg.URI, "sslmode=disable", "sslmode=require", 1)
	socketURI := fmt.Sprintf("postgres://%s@/%s?host=%s&sslmode=disable",
		url.User(pg.User), pg.Database, url.QueryEscape(filepath.Join(pg.Dir, fmt.Sprintf(".s.PGSQL.%d", pg.Port))))
	for name, uri := range map[string]string{"tls": tlsURI, "unix socket": socketURI} {
		t.Run(name, func(t *testing.T) {
			db, err := sql.Open("floe-pg", uri)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			pid := func() int {
				t.Helper()
				var p int
				if err := db.QueryRowContext(t.Context(), "SELECT pg_backend_pid()").Scan(&p); err != nil {
					t.Fatal(err)
				}
				return p
			}
			if name == "tls" {
				var ssl bool
				var version string
				if err := db.QueryRowContext(t.Context(), "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl, &version); err != nil || !ssl {
					t.Fatalf("not over TLS: %v %v", ssl, err)
				}
				t.Logf("over %s", version)
			}
			first := pid()
			time.Sleep(300 * time.Millisecond)
			if again := pid(); again != first {
				t.Errorf("a healthy pooled connection was replaced: backend %d, then %d", first, again)
			}
		})
	}
}

// enableSSL turns SSL on in pg with a self-signed certificate.
func enableSSL(t *testing.T, pg *testenv.PGServer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(pg.Dir, &st); err != nil {
		t.Fatal(err)
	}
	crt, kf := filepath.Join(pg.Dir, "server.crt"), filepath.Join(pg.Dir, "server.key")
	for f, b := range map[string][]byte{
		crt: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		kf:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := sql.Open("pg", pg.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{
		"ALTER SYSTEM SET ssl_cert_file = '" + crt + "'",
		"ALTER SYSTEM SET ssl_key_file = '" + kf + "'",
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if _, err := admin.ExecContext(t.Context(), q); err != nil {
			t.Fatal(q, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
}
