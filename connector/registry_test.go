package connector_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/localstack"
)

// Schemas of the tests: each format with a reference to a schema of its
// own kind in another subject.
var (
	avroMoney = sr.Schema{Schema: `{"type":"record","name":"Money","namespace":"shop","fields":[
		{"name":"units","type":"long"},{"name":"currency","type":"string"}]}`}
	avroOrder = sr.Schema{
		Schema: `{"type":"record","name":"Order","namespace":"shop","fields":[
			{"name":"id","type":"long"},{"name":"total","type":"shop.Money"}]}`,
		References: []sr.SchemaReference{{Name: "shop.Money", Subject: "shop-money-avro", Version: 1}},
	}
	protoCurrency = sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package shop;
enum Currency { EUR = 0; USD = 1; }
`}
	protoMoney = sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package shop;
import "shop/currency.proto";
message Money { int64 units = 1; Currency currency = 2; }
`, References: []sr.SchemaReference{{Name: "shop/currency.proto", Subject: "shop-currency-proto", Version: 1}}}
	protoOrder = sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3";
package shop;
import "shop/money.proto";
message Order {
  int64 id = 1;
  Money total = 2;
  message Line { string sku = 1; }
  repeated Line lines = 3;
}
message Refund { int64 order_id = 1; }
`, References: []sr.SchemaReference{
		{Name: "shop/money.proto", Subject: "shop-money-proto", Version: 1},
		{Name: "shop/currency.proto", Subject: "shop-currency-proto", Version: 1},
	}}
	jsonMoney = sr.Schema{Type: sr.TypeJSON, Schema: `{"$id":"https://floe.dev/money.json","type":"object",
		"properties":{"units":{"type":"integer"},"currency":{"type":"string"}}}`}
	jsonOrder = sr.Schema{
		Type: sr.TypeJSON,
		Schema: `{"type":"object","properties":{"id":{"type":"integer"},
			"total":{"$ref":"https://floe.dev/money.json"}}}`,
		References: []sr.SchemaReference{{Name: "https://floe.dev/money.json", Subject: "shop-money-json", Version: 1}},
	}
)

// register registers schema under subject over HTTP and returns its ID.
func register(t *testing.T, url, subject string, schema sr.Schema) int {
	t.Helper()
	id, err := localstack.RegisterSchema(t.Context(), url, subject, schema)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func newRegistry(t *testing.T, cfg connector.RegistryConfig) *connector.Registry {
	t.Helper()
	r, err := connector.NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// avroLong is Avro's encoding of a long (zigzag varint), which is
// encoding/binary's varint.
func avroLong(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func avroString(b []byte, s string) []byte { return append(avroLong(b, int64(len(s))), s...) }

// TestRegistryResolvesEachFormat produces records in the wire format of
// Avro, Protobuf (two messages of one .proto, one nested) and JSON Schema
// schemas, each referencing another schema, into the local stack's broker
// with its registry, reads them back from the log and resolves them: each
// gives its schema's ID, type and text, every referenced schema (also
// those referenced through another reference, each once, after what they
// reference), the Protobuf message indexes and the encoded value.
func TestRegistryResolvesEachFormat(t *testing.T) {
	e := newEnv(t)
	url := e.Stack.Registry
	register(t, url, "shop-money-avro", avroMoney)
	register(t, url, "shop-currency-proto", protoCurrency)
	register(t, url, "shop-money-proto", protoMoney)
	register(t, url, "shop-money-json", jsonMoney)
	ids := map[string]int{
		"avro":  register(t, url, "orders-avro-value", avroOrder),
		"proto": register(t, url, "orders-proto-value", protoOrder),
		"json":  register(t, url, "orders-json-value", jsonOrder),
	}

	avroBody := avroString(avroLong(avroLong(nil, 7), 1999), "EUR")
	protoOrderBody := []byte{0x08, 0x07}               // id = 7
	protoLineBody := []byte{0x0a, 0x03, 'a', 'b', 'c'} // sku = "abc"
	protoRefundBody := []byte{0x08, 0x07}              // order_id = 7
	jsonBody := []byte(`{"id":7,"total":{"units":1999,"currency":"EUR"}}`)
	type want struct {
		id      int
		typ     connector.SchemaType
		text    string
		refs    []string // subject names, in order
		indexes []int
		data    []byte
	}
	cases := []want{
		{ids["avro"], connector.SchemaAvro, avroOrder.Schema, []string{"shop-money-avro"}, nil, avroBody},
		{ids["proto"], connector.SchemaProtobuf, protoOrder.Schema, []string{"shop-currency-proto", "shop-money-proto"}, []int{0}, protoOrderBody},
		{ids["proto"], connector.SchemaProtobuf, protoOrder.Schema, []string{"shop-currency-proto", "shop-money-proto"}, []int{0, 0}, protoLineBody},
		{ids["proto"], connector.SchemaProtobuf, protoOrder.Schema, []string{"shop-currency-proto", "shop-money-proto"}, []int{1}, protoRefundBody},
		{ids["json"], connector.SchemaJSON, jsonOrder.Schema, []string{"shop-money-json"}, nil, jsonBody},
	}
	e.Topic("orders", 1, nil)
	var recs []*kgo.Record
	for _, c := range cases {
		recs = append(recs, &kgo.Record{Topic: "orders", Value: localstack.WireFormat(c.id, c.indexes, c.data)})
	}
	e.Produce(recs)

	reg := newRegistry(t, connector.RegistryConfig{URL: url})
	var got []*kgo.Record
	if err := e.Broker().ReadLog(t.Context(), "orders", 0, 0, int64(len(cases)), func(r *kgo.Record, _ int64) bool {
		got = append(got, r)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cases) {
		t.Fatalf("read %d records, want %d", len(got), len(cases))
	}
	for i, c := range cases {
		v, err := reg.Resolve(t.Context(), got[i].Value)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		s := v.Schema
		var subjects []string
		for _, r := range s.References {
			subjects = append(subjects, r.Subject)
		}
		if s.ID != c.id || s.Type != c.typ || s.Text != c.text || !slices.Equal(subjects, c.refs) ||
			!slices.Equal(v.Indexes, c.indexes) || !bytes.Equal(v.Data, c.data) {
			t.Errorf("record %d: schema %d %s refs %v indexes %v data %x\nwant schema %d %s refs %v indexes %v data %x",
				i, s.ID, s.Type, subjects, v.Indexes, v.Data, c.id, c.typ, c.refs, c.indexes, c.data)
		}
	}

	// A reference carries the name the referencing schema uses, and the
	// referenced schema whole.
	v, err := reg.Resolve(t.Context(), got[1].Value)
	if err != nil {
		t.Fatal(err)
	}
	money := v.Schema.References[1]
	if money.Name != "shop/money.proto" || money.Version != 1 || money.Type != connector.SchemaProtobuf ||
		money.Text != protoMoney.Schema || money.ID == 0 {
		t.Errorf("reference: %+v", money)
	}
	if v.Schema != mustResolve(t, reg, got[2].Value).Schema {
		t.Error("two values of one schema ID got two schemas: the cache by ID is not used")
	}
}

func mustResolve(t *testing.T, reg *connector.Registry, payload []byte) connector.RegistryValue {
	t.Helper()
	v, err := reg.Resolve(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A payload that is not in the wire format is a *WireError, and a schema ID
// the registry does not have an *UnknownSchemaError: what a sink
// dead-letters. Neither is transient.
func TestRegistryRecordErrors(t *testing.T) {
	srv := serveRegistry(t, srfake.NewRegistry(), "", nil)
	protoID := register(t, srv.url, "p-value", protoCurrency)
	reg := newRegistry(t, connector.RegistryConfig{URL: srv.url})

	for _, c := range []struct {
		name    string
		payload []byte
		reason  string
	}{
		{"empty", nil, "empty"},
		{"JSON text", []byte(`{"id":7}`), "first byte is 0x7b"},
		{"short", []byte{0, 0, 0, 1}, "4 bytes are too short"},
		{"Protobuf without indexes", localstack.WireFormat(protoID, nil, nil), "indexes are missing"},
		{"Protobuf indexes cut short", append(localstack.WireFormat(protoID, nil, nil), 0x04, 0x02), "indexes: cut short"},
		{"Protobuf index count beyond the payload", append(localstack.WireFormat(protoID, nil, nil), 0xfe, 0xff, 0xff, 0xff, 0x0f), "more than the payload's bytes can hold"},
		{"negative Protobuf index count", append(localstack.WireFormat(protoID, nil, nil), 0x01, 0x02), "a negative count"},
		{"Protobuf index overflowing", append(localstack.WireFormat(protoID, nil, nil), 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "overflow"},
		{"negative Protobuf index", append(localstack.WireFormat(protoID, nil, nil), 0x02, 0x01), "negative Protobuf message index -1"},
	} {
		_, err := reg.Resolve(t.Context(), c.payload)
		var we *connector.WireError
		if !errors.As(err, &we) || !strings.Contains(we.Reason, c.reason) {
			t.Errorf("%s: err %v, want a WireError saying %q", c.name, err, c.reason)
		}
		if catalog.IsTransient(err) {
			t.Errorf("%s: transient: %v", c.name, err)
		}
	}

	_, err := reg.Resolve(t.Context(), localstack.WireFormat(4242, nil, []byte{2}))
	var unknown *connector.UnknownSchemaError
	if !errors.As(err, &unknown) || unknown.ID != 4242 || !strings.Contains(err.Error(), srv.url) {
		t.Fatalf("unknown schema ID: %v, want an UnknownSchemaError naming the registry and ID 4242", err)
	}
	if catalog.IsTransient(err) {
		t.Errorf("unknown schema ID is transient: %v", err)
	}
}

// A registry that stops answering mid-run (its listener and connections
// closed) gives RegistryUnavailableError, which unwraps to the network
// error and which catalog.IsTransient accepts; schemas already fetched
// keep resolving from the cache, and the others resolve again once the
// registry is back on its address. A server error (503) and a registry
// slower than the timeout are unavailable too.
func TestRegistryUnavailable(t *testing.T) {
	fake := srfake.NewRegistry()
	srv := serveRegistry(t, fake, "", nil)
	first := register(t, srv.url, "shop-money-avro", avroMoney)
	second := register(t, srv.url, "orders-value", avroOrder)
	reg := newRegistry(t, connector.RegistryConfig{URL: srv.url, Timeout: 300 * time.Millisecond})
	mustResolve(t, reg, localstack.WireFormat(first, nil, []byte{2}))

	srv.stop()
	// Checked at start, a registry that does not answer names the flag
	// (from a new-user run).
	if err := reg.Check(t.Context()); err == nil || !strings.HasSuffix(err.Error(), "check --schema-registry") {
		t.Errorf("check of a registry that does not answer: %v; want the error naming --schema-registry", err)
	}
	if _, err := reg.Resolve(t.Context(), localstack.WireFormat(first, nil, []byte{2})); err != nil {
		t.Errorf("a cached schema while the registry is down: %v", err)
	}
	_, err := reg.Resolve(t.Context(), localstack.WireFormat(second, nil, []byte{2}))
	checkUnavailable(t, "registry stopped", err)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("registry stopped: %v does not unwrap to the refused connection", err)
	}

	srv = serveRegistry(t, fake, srv.addr, nil)
	v, err := reg.Resolve(t.Context(), localstack.WireFormat(second, nil, []byte{2}))
	if err != nil || v.Schema.ID != second || len(v.Schema.References) != 1 {
		t.Fatalf("registry back: %+v, %v", v, err)
	}

	// Faults of a running registry: a 503 (Confluent's answer while its
	// leader is unknown), then an answer slower than the timeout.
	third := register(t, srv.url, "c-value", sr.Schema{Schema: `"string"`})
	var mode atomic.Int32
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		switch mode.Load() {
		case 1:
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error_code":50004,"message":"Leader is unknown"}`))
			return true
		case 2:
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		}
		return false
	})
	mode.Store(1)
	_, err = reg.Resolve(t.Context(), localstack.WireFormat(third, nil, []byte{2}))
	checkUnavailable(t, "HTTP 503", err)
	mode.Store(2)
	_, err = reg.Resolve(t.Context(), localstack.WireFormat(third, nil, []byte{2}))
	checkUnavailable(t, "timeout", err)
	mode.Store(0)
	mustResolve(t, reg, localstack.WireFormat(third, nil, []byte{2}))
}

func checkUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	var ue *connector.RegistryUnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("%s: %v, want a RegistryUnavailableError", what, err)
	}
	if !catalog.IsTransient(err) {
		t.Errorf("%s: catalog.IsTransient(%v) = false", what, err)
	}
	var unknown *connector.UnknownSchemaError
	if errors.As(err, &unknown) {
		t.Errorf("%s: %v is also an UnknownSchemaError: its records would be dead-lettered", what, err)
	}
}

// Credentials: basic auth and a bearer token are sent as configured;
// missing (401) or wrong (403) ones are a RegistryAuthError that names the
// registry and the flags to fix, never transient.
func TestRegistryAuth(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("floe:s3cret"))
	srv := serveRegistry(t, srfake.NewRegistry(srfake.WithAuth(basic)), "", nil)
	cl, err := sr.NewClient(sr.URLs(srv.url), sr.BasicAuth("floe", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(t.Context(), "a-value", avroMoney)
	if err != nil {
		t.Fatal(err)
	}
	payload := localstack.WireFormat(ss.ID, nil, []byte{2})

	v := mustResolve(t, newRegistry(t, connector.RegistryConfig{URL: srv.url, User: "floe", Password: "s3cret"}), payload)
	if v.Schema.Text != avroMoney.Schema {
		t.Errorf("schema through basic auth: %q", v.Schema.Text)
	}
	for _, c := range []struct {
		name   string
		cfg    connector.RegistryConfig
		status int
	}{
		{"no credentials", connector.RegistryConfig{URL: srv.url}, 401},
		{"wrong password", connector.RegistryConfig{URL: srv.url, User: "floe", Password: "guess"}, 403},
		{"a token instead", connector.RegistryConfig{URL: srv.url, Token: "t0ken"}, 403},
	} {
		_, err := newRegistry(t, c.cfg).Resolve(t.Context(), payload)
		var ae *connector.RegistryAuthError
		if !errors.As(err, &ae) || ae.StatusCode != c.status {
			t.Errorf("%s: %v, want a RegistryAuthError with HTTP %d", c.name, err, c.status)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, srv.url) || !strings.Contains(msg, "--schema-registry-user") ||
			!strings.Contains(msg, "--schema-registry-token") {
			t.Errorf("%s: %q does not name the registry and the flags to fix", c.name, msg)
		}
		if catalog.IsTransient(err) {
			t.Errorf("%s: rejected credentials are transient", c.name)
		}
	}

	tokenSrv := serveRegistry(t, srfake.NewRegistry(srfake.WithAuth("Bearer t0ken")), "", nil)
	tcl, err := sr.NewClient(sr.URLs(tokenSrv.url), sr.BearerToken("t0ken"))
	if err != nil {
		t.Fatal(err)
	}
	if ss, err = tcl.CreateSchema(t.Context(), "a-value", avroMoney); err != nil {
		t.Fatal(err)
	}
	mustResolve(t, newRegistry(t, connector.RegistryConfig{URL: tokenSrv.url, Token: "t0ken"}), localstack.WireFormat(ss.ID, nil, []byte{2}))
}

// An https registry with a self-signed certificate: refused (and not
// retried) without its CA, with a message pointing at
// --schema-registry-ca; trusted with the CA file.
func TestRegistryTLS(t *testing.T) {
	cert, caFile := selfSigned(t)
	fake := srfake.NewRegistry()
	srv := serveRegistry(t, fake, "", &tls.Config{Certificates: []tls.Certificate{cert}})
	if !strings.HasPrefix(srv.url, "https://") {
		t.Fatalf("url %s", srv.url)
	}
	id, _, err := fake.RegisterSchema("a-value", avroMoney)
	if err != nil {
		t.Fatal(err)
	}
	payload := localstack.WireFormat(id, nil, []byte{2})

	_, err = newRegistry(t, connector.RegistryConfig{URL: srv.url}).Resolve(t.Context(), payload)
	if err == nil || !strings.Contains(err.Error(), "--schema-registry-ca") || catalog.IsTransient(err) {
		t.Errorf("untrusted certificate: %v, want a lasting error naming --schema-registry-ca", err)
	}
	v := mustResolve(t, newRegistry(t, connector.RegistryConfig{URL: srv.url, CAFile: caFile}), payload)
	if v.Schema.ID != id {
		t.Errorf("schema over https: %+v", v.Schema)
	}

	// https:// to a plain http registry.
	plain := serveRegistry(t, fake, "", nil)
	_, err = newRegistry(t, connector.RegistryConfig{URL: strings.Replace(plain.url, "http://", "https://", 1)}).Resolve(t.Context(), payload)
	if err == nil || !strings.Contains(err.Error(), "use http://") || catalog.IsTransient(err) {
		t.Errorf("https to an http server: %v", err)
	}
}

// A URL that reaches an HTTP server but not a registry's API (a wrong
// path) is an error to fix, never an unknown schema: that would
// dead-letter every record.
func TestRegistryWrongPath(t *testing.T) {
	srv := serveRegistry(t, srfake.NewRegistry(), "", nil)
	_, err := newRegistry(t, connector.RegistryConfig{URL: srv.url + "/not-the-api"}).Resolve(t.Context(), localstack.WireFormat(1, nil, nil))
	var unknown *connector.UnknownSchemaError
	if err == nil || errors.As(err, &unknown) || catalog.IsTransient(err) || !strings.Contains(err.Error(), "base URL") {
		t.Errorf("wrong path: %v", err)
	}
}

// Many partitions meeting a new schema ID at once fetch it once, and never
// again.
func TestRegistryFetchesEachIDOnce(t *testing.T) {
	fake := srfake.NewRegistry()
	var fetches atomic.Int32
	fake.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/schemas/ids/") {
			fetches.Add(1)
			time.Sleep(50 * time.Millisecond) // long enough for every caller to wait on one fetch
		}
		return false
	})
	srv := serveRegistry(t, fake, "", nil)
	id := register(t, srv.url, "a-value", avroMoney)
	fetches.Store(0)
	reg := newRegistry(t, connector.RegistryConfig{URL: srv.url})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := reg.Resolve(t.Context(), localstack.WireFormat(id, nil, []byte{2})); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	mustResolve(t, reg, localstack.WireFormat(id, nil, []byte{4}))
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches of schema %d, want 1", n, id)
	}
}

func TestRegistryConfigErrors(t *testing.T) {
	_, caFile := selfSigned(t)
	for _, c := range []struct {
		name string
		cfg  connector.RegistryConfig
		want string
	}{
		{"no URL", connector.RegistryConfig{}, "no URL"},
		{"no scheme", connector.RegistryConfig{URL: "registry:8081"}, "want http://HOST:PORT"},
		{"second URL bad", connector.RegistryConfig{URL: "http://a:8081,ftp://b"}, `"ftp://b"`},
		{"token and user", connector.RegistryConfig{URL: "http://a:8081", User: "u", Token: "t"}, "not both"},
		{"password alone", connector.RegistryConfig{URL: "http://a:8081", Password: "p"}, "without --schema-registry-user"},
		{"CA for http", connector.RegistryConfig{URL: "http://a:8081", CAFile: caFile}, "https only"},
		{"CA missing", connector.RegistryConfig{URL: "https://a:8081", CAFile: filepath.Join(t.TempDir(), "nope.pem")}, "no such file"},
		{"CA not PEM", connector.RegistryConfig{URL: "https://a:8081", CAFile: writeFile(t, "ca.pem", "hello")}, "no PEM certificate"},
	} {
		if _, err := connector.NewRegistry(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if _, err := connector.NewRegistry(connector.RegistryConfig{URL: "http://a:8081, https://b:8081", CAFile: caFile}); err != nil {
		t.Errorf("two URLs, one https, with a CA: %v", err)
	}
}

// registryServer serves a srfake registry over HTTP(S) on loopback TCP,
// as a real registry is reached.
type registryServer struct {
	url, addr string
	srv       *http.Server
}

// serveRegistry serves fake on addr (empty: a free port), with TLS when
// tlsCfg is set, until stop or the end of the test.
func serveRegistry(t *testing.T, fake *srfake.Registry, addr string, tlsCfg *tls.Config) *registryServer {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if tlsCfg != nil {
		l, scheme = tls.NewListener(l, tlsCfg), "https"
	}
	s := &registryServer{url: scheme + "://" + l.Addr().String(), addr: l.Addr().String(),
		srv: &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 5 * time.Second,
			ErrorLog: log.New(io.Discard, "", 0)}} // refused TLS handshakes are what some tests expect
	go s.srv.Serve(l)
	t.Cleanup(s.stop)
	return s
}

// stop closes the listener and every connection at once, as a registry
// process that dies.
func (s *registryServer) stop() { s.srv.Close() }

// selfSigned makes a certificate for 127.0.0.1 signed by itself and writes
// it as the CA file.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "floe test registry"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return cert, writeFile(t, "ca.pem", string(certPEM))
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Check, which runs before a sink or a replay creates anything, passes a
// registry that answers; refuses one that does not answer, one that
// rejects the credentials (401) and a server that is no registry; and
// passes a 403 on the subject list: the credentials are known, and a
// least-privilege key may read schemas by ID without listing subjects.
func TestRegistryCheck(t *testing.T) {
	fake := srfake.NewRegistry()
	srv := serveRegistry(t, fake, "", nil)
	reg := newRegistry(t, connector.RegistryConfig{URL: srv.url, Timeout: time.Second})
	if err := reg.Check(t.Context()); err != nil {
		t.Fatalf("a registry that answers: %v", err)
	}
	var status atomic.Int32
	fake.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		code := int(status.Load())
		switch code {
		case 0:
			return false
		case http.StatusOK: // a web server, not a registry
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>hello</html>"))
		default:
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error_code":%d,"message":"no"}`, code)
		}
		return true
	})
	status.Store(http.StatusForbidden)
	if err := reg.Check(t.Context()); err != nil {
		t.Errorf("403 on the subject list: %v", err)
	}
	status.Store(http.StatusUnauthorized)
	if err := reg.Check(t.Context()); !errors.As(err, new(*connector.RegistryAuthError)) || !strings.Contains(err.Error(), "nothing was created") {
		t.Errorf("401: %v, want a RegistryAuthError saying nothing was created", err)
	}
	status.Store(http.StatusOK)
	if err := reg.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "the answer is not a schema registry's") {
		t.Errorf("a web page: %v", err)
	}
	srv.stop()
	checkUnavailable(t, "registry stopped", reg.Check(t.Context()))
}
