package main

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

// TestRESTTableS3ErrorsAreNotMissing: the tables of a REST catalog are on
// a real S3 server (versitygw) whose responses carry a request ID and a
// host ID with "301" in them, as real servers' do by chance. gocloud's S3
// driver takes any S3 error whose text contains "301" for a redirect to a
// missing bucket, and iceberg-go reports that as fs.ErrNotExist without
// the cause. floe kept such errors free of IDs and addresses for the
// tables of its SQL and Glue catalogs only; a REST catalog's tables read
// through iceberg-go's own S3 configuration, so a rejected secret read
// "file does not exist", whether floe's flags or the server's vended
// properties gave it, and a server down on a port such as 30100 made a
// missing file, which a sink stops on, of an outage it retries through.
// The proxy only adds the IDs: the S3 answers are versitygw's.
func TestRESTTableS3ErrorsAreNotMissing(t *testing.T) {
	s3 := testenv.VersityGW(t)
	s3.CreateBucket(t, "lake")
	isolateAWS(t)
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
	f := newRESTFixtureOn(t, catalog.Config{Catalog: filepath.Join(t.TempDir(), "rest-backend.db"), Warehouse: "s3://lake/warehouse",
		S3: catalog.S3Config{Endpoint: srv.URL, Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey}})

	// A sink's table, whose reading reads a manifest list.
	st, _, _ := partitionedStack(t, "orders", 1)
	produceRound(t, st.Brokers, "orders", 1, 20, map[int32]int64{})
	mustFloe(t, "sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end",
		"--catalog", f.srv.URL, "--catalog-token", f.token, "--s3-endpoint", srv.URL, "--s3-region", s3.Region,
		"--s3-access-key-id", s3.AccessKey, "--s3-secret-access-key", s3.SecretKey)
	rest := catalog.Config{Catalog: f.srv.URL, Token: f.token}
	ident := table.Identifier{"lake", "orders"}
	files := []string{"files", "--table", "lake.orders", "--catalog", f.srv.URL, "--catalog-token", f.token}

	t.Run("wrong secret from floe's flags", func(t *testing.T) {
		code, out, errs := floe(t, append(files, "--s3-endpoint", srv.URL, "--s3-region", s3.Region,
			"--s3-access-key-id", s3.AccessKey, "--s3-secret-access-key", "not-the-secret-0123456789")...)
		if code == 0 || !strings.Contains(errs, "SignatureDoesNotMatch") || strings.Contains(errs, "does not exist") {
			t.Errorf("floe files with a wrong secret: exit %d\n%s%s\nwant SignatureDoesNotMatch, not a missing file", code, out, errs)
		}
	})

	t.Run("wrong secret vended by the catalog", func(t *testing.T) {
		setTableConfig(f, map[string]string{iceio.S3EndpointURL: srv.URL, iceio.S3Region: s3.Region,
			iceio.S3AccessKeyID: s3.AccessKey, iceio.S3SecretAccessKey: "not-the-secret-0123456789"})
		code, out, errs := floe(t, files...)
		if code == 0 || !strings.Contains(errs, "SignatureDoesNotMatch") || strings.Contains(errs, "does not exist") {
			t.Errorf("floe files with a wrong vended secret: exit %d\n%s%s\nwant SignatureDoesNotMatch, not a missing file", code, out, errs)
		}
		// The vended properties still win over floe's own settings: the
		// right secret given to floe does not mend the vended wrong one.
		code, out, errs = floe(t, append(files, "--s3-endpoint", srv.URL, "--s3-region", s3.Region,
			"--s3-access-key-id", s3.AccessKey, "--s3-secret-access-key", s3.SecretKey)...)
		if code == 0 || !strings.Contains(errs, "SignatureDoesNotMatch") {
			t.Errorf("floe files with a wrong vended secret and the right one given to floe: exit %d\n%s%s\nwant the vended secret used", code, out, errs)
		}
		// No credentials vended, none set for floe: the error says so.
		setTableConfig(f, map[string]string{iceio.S3EndpointURL: srv.URL, iceio.S3Region: s3.Region})
		code, out, errs = floe(t, files...)
		if code == 0 || !strings.Contains(errs, "the REST catalog vended none") {
			t.Errorf("floe files with no credentials anywhere: exit %d\n%s%s\nwant that the catalog vended none", code, out, errs)
		}
		// And the right vended secret reads the table, with no S3
		// setting of floe's.
		setTableConfig(f, map[string]string{iceio.S3EndpointURL: srv.URL, iceio.S3Region: s3.Region,
			iceio.S3AccessKeyID: s3.AccessKey, iceio.S3SecretAccessKey: s3.SecretKey})
		if out := mustFloe(t, files...); !strings.Contains(out, ".parquet") {
			t.Errorf("floe files with the right vended secret:\n%s\nwant the table's data file", out)
		}
	})

	t.Run("server down on a port with 301", func(t *testing.T) {
		down := closed301Port(t)
		setTableConfig(f, map[string]string{iceio.S3EndpointURL: "http://" + down, iceio.S3Region: s3.Region,
			iceio.S3AccessKeyID: s3.AccessKey, iceio.S3SecretAccessKey: s3.SecretKey})
		cat, err := catalog.Open(t.Context(), rest)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := cat.LoadTable(t.Context(), ident)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tbl.Scan().ToArrowTable(t.Context())
		// The sink retries what catalog.IsTransient accepts and stops on a
		// missing file.
		if err == nil || errors.Is(err, fs.ErrNotExist) || !catalog.IsTransient(err) {
			t.Fatalf("read with the S3 server down at %s: %v\nwant a transient error, not fs.ErrNotExist", down, err)
		}
		code, out, errs := floe(t, files...)
		if code == 0 || !strings.Contains(errs, "unreachable") || strings.Contains(errs, "does not exist") {
			t.Errorf("floe files with the S3 server down: exit %d\n%s%s\nwant the object store unreachable", code, out, errs)
		}
	})

	// Last, since it changes the table: remote signing, which iceberg-go
	// refuses with its own configuration, is still refused as such when
	// the table's properties ask for it.
	t.Run("remote signing in the table's properties", func(t *testing.T) {
		setTableConfig(f, map[string]string{})
		cat, err := catalog.Open(t.Context(), rest)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := cat.LoadTable(t.Context(), ident)
		if err != nil {
			t.Fatal(err)
		}
		tx := tbl.NewTransaction()
		if err := tx.SetProperties(iceberg.Properties{iceio.S3RemoteSigningEnabled: "true"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		code, out, errs := floe(t, append(files, "--s3-endpoint", srv.URL, "--s3-region", s3.Region,
			"--s3-access-key-id", s3.AccessKey, "--s3-secret-access-key", s3.SecretKey)...)
		if code == 0 || !strings.Contains(errs, "remote S3 request signing is not supported") {
			t.Errorf("floe files of a table that asks for remote signing: exit %d\n%s%s\nwant iceberg-go's refusal", code, out, errs)
		}
	})
}

func setTableConfig(f *restFixture, cfg map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tableConfig = cfg
}

// closed301Port returns a loopback address whose port has "301" in it and
// where nothing listens.
func closed301Port(t *testing.T) string {
	t.Helper()
	for port := 30100; port < 30200; port++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Skip("no free port between 30100 and 30199")
	return ""
}
