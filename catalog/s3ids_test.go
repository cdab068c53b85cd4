package catalog_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
)

// TestS3IDsAreNotRedirects puts versitygw behind a proxy that gives every
// response a request ID and host ID containing "301", as real servers do
// by chance (MinIO's host ID is fixed per server: CI met one). gocloud's
// S3 driver takes any error whose text contains "301" for a redirect to a
// missing bucket, so a rejected secret read "file does not exist" for
// every command. Now it reads as rejected credentials, and a file that is
// really missing still reads as missing.
func TestS3IDsAreNotRedirects(t *testing.T) {
	s3 := testenv.VersityGW(t)
	s3.CreateBucket(t, "lake")
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		r.Header.Set("X-Amz-Request-Id", "18C0FFEE301")
		r.Header.Set("X-Amz-Id-2", "dd9025301bab4ad4")
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)

	cfg, tbl, fsys := tableBehind(t, s3, srv.URL)
	if _, err := fsys.Open(tbl.Location() + "/metadata/missing.json"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open a missing file: %v; want fs.ErrNotExist", err)
	}

	// The table is on S3; the warehouse for new tables is not, as in
	// TestS3ErrorsEveryCommand: the catalog opens, the table's load fails.
	bad, err := catalog.Open(t.Context(), cfg("not-the-secret-0123456789", t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.LoadTable(t.Context(), tbl.Identifier())
	if !errors.Is(err, catalog.ErrStorageCredentials) || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("load with a wrong secret: %v\nwant rejected credentials (SignatureDoesNotMatch)", err)
	}
}

// TestS3UnreachableIsNotMissing: a request that gets no response (the
// server is down) named its URL and the server's address in its error; an
// object key with "301" in it (a random UUID has one now and then) or a
// port such as 30100 made gocloud's S3 driver take the error for a
// redirect to a missing bucket, so iceberg-go said "file does not exist"
// and a sink whose storage was down stopped for good instead of retrying
// (the fault campaign's storage scenario met it). Such an error must not
// read as a missing file.
func TestS3UnreachableIsNotMissing(t *testing.T) {
	s3 := testenv.VersityGW(t)
	s3.CreateBucket(t, "lake")
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	// A proxy on a port with "301" in it, closed before the reads.
	srv := proxyOn301Port(t, target)
	_, tbl, fsys := tableBehind(t, s3, srv.URL)
	srv.Close()
	for _, name := range []string{"00006-34f13018-06ac-4d15-8a95-b244518aa074.metadata.json", "00007-0a1b2c3d.metadata.json"} {
		_, err := fsys.Open(tbl.Location() + "/metadata/" + name)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			t.Errorf("open %s with the server down: %v; want an error other than fs.ErrNotExist", name, err)
		}
	}
}

// TestS3UnreachableFromTheEnvironmentIsNotMissing: as
// TestS3UnreachableIsNotMissing, for a table on S3 of a catalog whose
// warehouse is a folder, its endpoint and keys given only by the AWS_*
// variables. floe left such tables to iceberg-go's own S3 configuration,
// whose errors kept the URL, so a down server read "file does not exist"
// for every command whenever the metadata file's name or the port held
// "301" (a CI flake of TestS3ErrorsEveryCommand, "endpoint unreachable,
// from the environment").
func TestS3UnreachableFromTheEnvironmentIsNotMissing(t *testing.T) {
	s3 := testenv.VersityGW(t)
	s3.CreateBucket(t, "lake")
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	srv := proxyOn301Port(t, target)
	cfg, tbl, _ := tableBehind(t, s3, srv.URL)
	srv.Close()
	for _, v := range []string{"AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(v, "")
	}
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", s3.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3.SecretKey)
	t.Setenv("AWS_REGION", s3.Region)
	env := cfg("", t.TempDir())
	env.S3 = catalog.S3Config{}
	cat, err := catalog.Open(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cat.LoadTable(t.Context(), tbl.Identifier())
	if !errors.Is(err, catalog.ErrStorageUnreachable) || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("load with the server down: %v\nwant object store unreachable", err)
	}
}

// proxyOn301Port starts a proxy to target on a loopback port with "301" in
// it, closed at the end of the test.
func proxyOn301Port(t *testing.T, target *url.URL) *httptest.Server {
	t.Helper()
	for port := 30100; port < 30200; port++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		srv := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
		srv.Listener.Close()
		srv.Listener = l
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	t.Skip("no free port between 30100 and 30199")
	return nil
}

// tableBehind creates table lake.t in a SQLite catalog, its files in s3's
// bucket lake reached through endpoint (a proxy), with the SDK's own
// configuration files and instance metadata out of the way. It returns
// the catalog configuration for another secret and warehouse, the table,
// and its files.
func tableBehind(t *testing.T, s3 *testenv.S3Server, endpoint string) (func(secret, warehouse string) catalog.Config, *table.Table, iceio.IO) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	cfg := func(secret, warehouse string) catalog.Config {
		return catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: warehouse,
			S3: catalog.S3Config{Endpoint: endpoint, Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: secret}}
	}
	cat, err := catalog.Open(t.Context(), cfg(s3.SecretKey, "s3://lake/warehouse"))
	if err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"lake", "t"}
	if err := cat.CreateNamespace(t.Context(), ident[:1], nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.CreateTable(t.Context(), ident, iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64, Required: true}))
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := tbl.FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return cfg, tbl, fsys
}
