package catalog

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// TestPostgresURLNotPostgres: a PostgreSQL catalog URL whose port is not
// PostgreSQL's fails naming the URL and --catalog, at once, for a command
// that creates the catalog's tables and for one that only reads
// (Existing, whose open reads the catalog's schema version). A server that takes the connection and never answers (a Kafka
// port, an HTTP server waiting for the end of a request line) is an
// unreachable catalog, as a REST or Glue one that never answers is; one
// that answers another protocol (a server greeting first, as SMTP or SSH
// do) is no PostgreSQL server. Both failed unclassified: "i/o timeout"
// after the driver's 10 s, "unexpected startup message: '2'".
func TestPostgresURLNotPostgres(t *testing.T) {
	silent := strings.TrimPrefix(silentServer(t), "http://")
	web := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(web.Close)
	greeter := greetingServer(t, "220 mail.example ESMTP ready\r\n")
	for _, c := range []struct {
		name, addr, query, want string
		unreachable             bool
	}{
		{"never answers", silent, "sslmode=disable&read_timeout=300ms", "no answer within the driver's read timeout", true},
		// TLS asked for first (the default sslmode): the TLS request
		// gets no answer either.
		{"never answers TLS", silent, "read_timeout=300ms", "no answer within the driver's read timeout", true},
		{"HTTP", strings.TrimPrefix(web.URL, "http://"), "sslmode=disable&read_timeout=300ms", "no answer within the driver's read timeout", true},
		{"greets", greeter, "sslmode=disable", "the server there does not answer as PostgreSQL", false},
		{"greets TLS", greeter, "sslmode=prefer", "a server that is not PostgreSQL (one that greets first, as SMTP does) answers so too", false},
	} {
		for _, existing := range []bool{false, true} {
			spec := "postgres://floe:pw@" + c.addr + "/iceberg?" + c.query
			start := time.Now()
			cat, err := Open(t.Context(), Config{Catalog: spec, Warehouse: t.TempDir(), Existing: existing})
			if err == nil {
				_, err = cat.LoadTable(t.Context(), table.Identifier{"lake", "orders"})
			}
			ce, ok := errors.AsType[*CheckError](err)
			if !ok || !slices.Contains(ce.Settings, SettingCatalog) || !strings.Contains(err.Error(), c.want) ||
				!strings.Contains(err.Error(), "postgres://floe:xxxxx@"+c.addr) || errors.Is(err, ErrCatalogUnreachable) != c.unreachable {
				t.Errorf("%s (existing %v): %v; want %q naming the URL and --catalog (unreachable: %v)", c.name, existing, err, c.want, c.unreachable)
			}
			if waited := time.Since(start); waited > 5*time.Second {
				t.Errorf("%s (existing %v): gave up after %s", c.name, existing, waited)
			}
		}
	}
}

// greetingServer returns the address of a server that sends greeting to
// every connection it takes, as an SMTP or SSH server does, and then
// reads and ignores what it is sent.
func greetingServer(t *testing.T, greeting string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			go func() {
				if _, err := c.Write([]byte(greeting)); err == nil {
					_, _ = io.Copy(io.Discard, c)
				}
			}()
		}
	}()
	return ln.Addr().String()
}
