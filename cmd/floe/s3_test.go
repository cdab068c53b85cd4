package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// s3Env is a test's real S3 server with a bucket, an embedded broker and
// a catalog: a SQLite catalog file, or "glue" (moto's, newGlueEnv).
type s3Env struct {
	s3      *testenv.S3Server
	brokers []string
	catalog string
	bucket  string
}

// newS3Env starts versitygw and a broker (newS3EnvOn).
func newS3Env(t *testing.T) *s3Env { return newS3EnvOn(t, testenv.VersityGW) }

// newS3EnvOn starts the S3 server start starts, with bucket "lake", and a
// broker. The AWS standard environment points at the server
// (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, ...), as a user would configure
// it; instance metadata is disabled so that no credential lookup leaves
// the machine.
func newS3EnvOn(t *testing.T, start func(testing.TB) *testenv.S3Server) *s3Env {
	t.Helper()
	srv := start(t)
	srv.CreateBucket(t, "lake")
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	isolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.Endpoint)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_REGION", srv.Region)
	return &s3Env{s3: srv, brokers: st.Brokers, catalog: filepath.Join(t.TempDir(), "catalog.db"), bucket: "lake"}
}

// isolateAWS keeps the AWS SDK away from the user's files and from
// instance metadata.
func isolateAWS(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	for _, v := range []string{"AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_GLUE", "AWS_S3_ENDPOINT",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		t.Setenv(v, "")
	}
}

func (e *s3Env) warehouse() string { return "s3://" + e.bucket + "/warehouse" }

// catalogConfig reaches the test's table the way the CLI does, from the
// environment.
func (e *s3Env) catalogConfig() catalog.Config {
	return catalog.Config{Catalog: e.catalog, Warehouse: e.warehouse()}
}

func (e *s3Env) sinkArgs(topic, table string, extra ...string) []string {
	return append([]string{"sink", "--brokers", strings.Join(e.brokers, ","), "--topic", topic, "--table", table,
		"--catalog", e.catalog, "--warehouse", e.warehouse()}, extra...)
}

// TestS3Errors checks the failures users hit first, on each S3 server
// (testenv.S3Servers), each reported at start with what to fix and without
// leaking the secret: wrong secret key (signature mismatch), unknown access
// key, missing bucket, endpoint unreachable, catalog unreachable, and a
// table whose location another catalog owns.
func TestS3Errors(t *testing.T) {
	for _, f := range testenv.S3Servers() {
		t.Run(f.Name, func(t *testing.T) { s3Errors(t, newS3EnvOn(t, f.Start)) })
	}
}

func s3Errors(t *testing.T, e *s3Env) {
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 1, 10, count)
	closed := refusedTCPAddr(t)
	const badSecret = "not-the-secret-0123456789"
	// An HTTP server that is no S3 server (a schema registry's port given
	// for the S3 endpoint answered "NotFound", naming nothing to check;
	// from a new-user run).
	notS3 := httptest.NewServer(http.NotFoundHandler())
	defer notS3.Close()

	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"wrong secret", []string{"--s3-secret-access-key", badSecret, "--s3-access-key-id", e.s3.AccessKey},
			[]string{"object store rejected the credentials", "SignatureDoesNotMatch"}},
		{"unknown key", []string{"--s3-access-key-id", "nobody", "--s3-secret-access-key", badSecret},
			[]string{"object store rejected the credentials"}},
		{"missing bucket", []string{"--warehouse", "s3://no-such-bucket/warehouse"},
			[]string{"bucket does not exist", `"no-such-bucket"`}},
		{"endpoint unreachable", []string{"--s3-endpoint", "http://" + closed},
			[]string{"object store unreachable", closed}},
		{"endpoint not S3", []string{"--s3-endpoint", notS3.URL},
			[]string{"is that an S3 server?", "check --s3-endpoint"}},
		{"catalog unreachable", []string{"--catalog", "postgres://floe:hunter2secret@" + closed + "/iceberg?sslmode=disable"},
			[]string{"catalog unreachable", "xxxxx"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			code, _, errs := floe(t, e.sinkArgs("orders", "lake.orders", append([]string{"--stop-at-end"}, c.args...)...)...)
			if code != exitError {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitError, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			for _, secret := range []string{badSecret, e.s3.SecretKey, "hunter2secret"} {
				if strings.Contains(errs, secret) {
					t.Errorf("stderr shows a secret:\n%s", errs)
				}
			}
			if d := time.Since(start); d > time.Minute {
				t.Errorf("took %s to fail", d)
			}
		})
	}

	t.Run("owned by another catalog", func(t *testing.T) {
		mustFloe(t, e.sinkArgs("orders", "lake.owned", "--stop-at-end")...)
		other := filepath.Join(t.TempDir(), "other.db")
		code, _, errs := floe(t, "sink", "--brokers", strings.Join(e.brokers, ","), "--topic", "orders", "--table", "lake.owned",
			"--catalog", other, "--warehouse", e.warehouse(), "--stop-at-end")
		// It names floe register, the way back after a lost catalog (from a
		// user's recovery run: it said only to sink into another table).
		if code != exitError || !strings.Contains(errs, "owned by another catalog") || !strings.Contains(errs, "s3://lake/warehouse/lake.db/owned") ||
			!strings.Contains(errs, "floe register --table lake.owned --location s3://lake/warehouse/lake.db/owned") {
			t.Fatalf("exit %d, stderr:\n%s", code, errs)
		}
		// The owner's table is untouched.
		checkTable(t, e.catalogConfig(), "lake.owned", "orders", count)
	})
}

// TestS3ErrorsEveryCommand: on each S3 server, every command that reads a
// table on S3 reports an unreachable endpoint, rejected credentials and an
// unreachable catalog as floe sink does, also when the warehouse for new
// tables is elsewhere
// (the table is on S3 all the same): the --s3-* flags are used and the
// failure is named. An endpoint from the environment that does not answer
// used to be called "catalog unreachable", and --s3-* flags without an
// s3:// warehouse were ignored.
func TestS3ErrorsEveryCommand(t *testing.T) {
	for _, f := range testenv.S3Servers() {
		t.Run(f.Name, func(t *testing.T) { s3ErrorsEveryCommand(t, newS3EnvOn(t, f.Start)) })
	}
}

func s3ErrorsEveryCommand(t *testing.T, e *s3Env) {
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 1, 10, count)
	mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...)
	closed := refusedTCPAddr(t)
	const badSecret = "not-the-secret-0123456789"
	// An HTTP server that is no S3 server (a schema registry's port given
	// for the S3 endpoint answered "NotFound", naming nothing to check;
	// from a new-user run).
	notS3 := httptest.NewServer(http.NotFoundHandler())
	defer notS3.Close()
	local := t.TempDir() // a warehouse for new tables that is not on S3

	commands := [][]string{
		{"sink", "--brokers", strings.Join(e.brokers, ","), "--topic", "orders", "--stop-at-end"},
		{"audit"},
		{"status"},
		{"maintain"},
		{"where", "--topic", "orders", "--partition", "0", "--offset", "1"},
		{"as-of", "--offsets", "orders/0=3"},
	}
	cases := []struct {
		name string
		env  [2]string
		args []string
		want []string
		not  string
	}{
		{name: "endpoint unreachable", args: []string{"--catalog", e.catalog, "--warehouse", local, "--s3-endpoint", "http://" + closed},
			want: []string{"object store unreachable", closed}, not: "catalog unreachable"},
		{name: "endpoint unreachable, from the environment", env: [2]string{"AWS_ENDPOINT_URL_S3", "http://" + closed},
			args: []string{"--catalog", e.catalog, "--warehouse", local},
			want: []string{"object store unreachable", closed}, not: "catalog unreachable"},
		{name: "wrong secret", args: []string{"--catalog", e.catalog, "--warehouse", local, "--s3-access-key-id", e.s3.AccessKey, "--s3-secret-access-key", badSecret},
			want: []string{"object store rejected the credentials", "SignatureDoesNotMatch"}},
		{name: "wrong secret, s3:// warehouse", args: []string{"--catalog", e.catalog, "--warehouse", e.warehouse(), "--s3-access-key-id", e.s3.AccessKey, "--s3-secret-access-key", badSecret},
			want: []string{"object store rejected the credentials", "SignatureDoesNotMatch", `bucket "lake"`}},
		{name: "catalog unreachable", args: []string{"--catalog", "postgres://floe:hunter2secret@" + closed + "/iceberg?sslmode=disable", "--warehouse", e.warehouse()},
			want: []string{"catalog unreachable", closed}, not: "object store unreachable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env[0] != "" {
				t.Setenv(c.env[0], c.env[1])
			}
			for _, cmd := range commands {
				args := append(append(append([]string{}, cmd...), "--table", "lake.orders"), c.args...)
				code, _, errs := floe(t, args...)
				if code != exitError {
					t.Errorf("floe %s: exit %d, want %d; stderr:\n%s", cmd[0], code, exitError, errs)
					continue
				}
				for _, w := range c.want {
					if !strings.Contains(errs, w) {
						t.Errorf("floe %s: stderr lacks %q:\n%s", cmd[0], w, errs)
					}
				}
				if c.not != "" && strings.Contains(errs, c.not) {
					t.Errorf("floe %s: stderr blames the wrong component (%q):\n%s", cmd[0], c.not, errs)
				}
				for _, secret := range []string{badSecret, e.s3.SecretKey, "hunter2secret"} {
					if strings.Contains(errs, secret) {
						t.Errorf("floe %s: stderr shows a secret:\n%s", cmd[0], errs)
					}
				}
			}
		})
	}
	// Nothing was written on the way.
	checkTable(t, e.catalogConfig(), "lake.orders", "orders", count)
}

// TestS3ServerDisappearsMidFlush kills each S3 server (SIGKILL) for about
// two seconds while a live sink flushes every few hundred milliseconds
// under a steady stream of records, then starts it again. The sink rides
// the outage out: it retries from the ledger (it used to exit 2, 22 times
// in 6 outages of the fault campaign), commits again once the server is
// back, and ends with every record in the table exactly once, without a
// restart.
func TestS3ServerDisappearsMidFlush(t *testing.T) {
	for _, f := range testenv.S3Servers() {
		t.Run(f.Name, func(t *testing.T) {
			e := newS3EnvOn(t, f.Start)
			rideOutOutage(t, e, e.s3.Stop, e.s3.Start)
		})
	}
}

// rideOutOutage runs a live sink of a fresh topic into lake.orders under a
// steady stream of records, calls down about a second in and up about two
// seconds later, and checks that the sink neither stopped nor lost
// anything: it met the outage (a retry is logged), caught up with every
// record after it, and the table holds each exactly once.
func rideOutOutage(t *testing.T, e *s3Env, down, up func()) {
	t.Helper()
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 2, 200, count)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		wg               sync.WaitGroup
		sinkErr          error
		sinkOut, sinkLog string
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sinkOut, sinkLog, sinkErr = floeCtx(ctx, e.sinkArgs("orders", "lake.orders", "--flush-records", "40", "--flush-interval", "150ms")...)
	}()
	defer func() {
		if t.Failed() {
			cancel()
			wg.Wait()
			t.Logf("sink error %v, output:\n%s\n%s", sinkErr, sinkOut, sinkLog)
		}
	}()
	cat, err := catalog.Open(t.Context(), e.catalogConfig())
	if err != nil {
		t.Fatal(err)
	}
	ledger := func() mapping.Ledger {
		tbl, err := snapshot.Open(t.Context(), cat, []string{"lake", "orders"}, snapshot.OpenOptions{})
		if err != nil {
			return mapping.Ledger{}
		}
		l, _ := tbl.Ledger()
		return l
	}
	waitFor(t, time.Minute, "first commits", func() bool { return len(ledger().Commits) >= 2 })

	// Keep records coming while the server goes and comes back.
	for i := range 12 {
		produceRound(t, e.brokers, "orders", 2, 30, count)
		if i == 3 {
			down()
		}
		if i == 8 {
			up()
		}
		// Five rounds of 400ms: the server is gone for about two seconds,
		// longer than the SDK's own retries bridge.
		time.Sleep(400 * time.Millisecond)
	}
	waitFor(t, time.Minute, "the sink to catch up after the outage", func() bool {
		next := ledger().Next()
		for p, n := range count {
			if next[mapping.TopicPartition{Topic: "orders", Partition: p}] != n {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()
	if sinkErr != nil {
		t.Fatalf("the sink did not ride out a two-second outage: %v", sinkErr)
	}
	if !strings.Contains(sinkLog, "transient storage, catalog or broker error") {
		t.Fatalf("the sink never met the outage (no retry logged)")
	}
	checkTable(t, e.catalogConfig(), "lake.orders", "orders", count)
}

// TestNoAWSCredentialsOneLine: without AWS credentials on a machine whose
// instance metadata endpoint refuses (as this one's does, and EC2's for a
// host without a role), floe's stderr is its own one line naming what to
// set; the AWS SDK's "falling back to IMDSv1" warning, which its default
// logger wrote to stderr above it, goes to floe's debug log. The CLI runs
// as a child process, since the SDK wrote to the process's stderr.
func TestNoAWSCredentialsOneLine(t *testing.T) {
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer imds.Close()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "status", "--table", "lake.x",
		"--catalog", filepath.Join(home, "catalog.db"), "--warehouse", "s3://bucket/")
	cmd.Env = []string{cliChildEnv + "=1", "HOME=" + home, "PATH=" + os.Getenv("PATH"), "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none"),
		"AWS_EC2_METADATA_SERVICE_ENDPOINT=" + imds.URL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitError {
		t.Fatalf("status without credentials: %v, want exit 2\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	// Nothing was rejected: none were there to present (from a new-user run).
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "floe: ") || !strings.Contains(lines[0], "no credentials for the object store: none of the SDK's sources gave usable AWS credentials") ||
		strings.Contains(lines[0], "rejected") {
		t.Errorf("stderr is not floe's one line:\n%s", stderr.String())
	}
}

// TestS3ErrorCodeNotNamedNotS3 (from a review): an answer with an S3
// error code is an S3 server's, not named "is that an S3 server? ...
// check --s3-endpoint" (meant for an answer without one, a schema
// registry's 404): throttling (SlowDown, 503), a bucket name S3 refuses
// (InvalidBucketName), a bucket in another region (PermanentRedirect).
// The server answers S3's error documents: versitygw and MinIO give none
// of these on demand.
func TestS3ErrorCodeNotNamedNotS3(t *testing.T) {
	isolateAWS(t)
	for _, c := range []struct {
		status int
		code   string
	}{
		{http.StatusServiceUnavailable, "SlowDown"},
		{http.StatusBadRequest, "InvalidBucketName"},
		{http.StatusMovedPermanently, "PermanentRedirect"},
	} {
		t.Run(c.code, func(t *testing.T) {
			var asked atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				asked.Add(1)
				w.Header().Set("Content-Type", "application/xml")
				w.Header().Set("x-amz-request-id", "4442587FB7D0A2F9")
				w.WriteHeader(c.status)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>S3 says %s</Message><BucketName>lake</BucketName><RequestId>4442587FB7D0A2F9</RequestId></Error>`, c.code, c.code)
			}))
			defer srv.Close()
			code, _, errs := floe(t, "status", "--table", "lake.orders", "--catalog", filepath.Join(t.TempDir(), "c.db"),
				"--warehouse", "s3://lake/warehouse", "--s3-endpoint", srv.URL, "--s3-region", "us-east-1",
				"--s3-access-key-id", "AKIAEXAMPLE", "--s3-secret-access-key", "secretsecretsecret")
			if asked.Load() == 0 {
				t.Fatalf("the server was not asked; exit %d: %s", code, errs)
			}
			if strings.Contains(errs, "is that an S3 server?") || strings.Contains(errs, "check --s3-endpoint") && !strings.Contains(errs, c.code) {
				t.Fatalf("an S3 server's %s answer is said not to be S3's, naming --s3-endpoint (exit %d):\n%s", c.code, code, errs)
			}
		})
	}
}

// TestDropOnS3: floe drop --yes on S3 servers deletes a table's data
// first, then its catalog entry and metadata (catalog's PurgeTable), and
// leaves nothing under its location; the table's name can be sunk into
// again.
func TestDropOnS3(t *testing.T) {
	for name, start := range map[string]func(testing.TB) *testenv.S3Server{"minio": testenv.MinIO, "versitygw": testenv.VersityGW} {
		t.Run(name, func(t *testing.T) {
			e := newS3EnvOn(t, start)
			if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 2, nil); err != nil {
				t.Fatal(err)
			}
			produceRound(t, e.brokers, "orders", 2, 20, map[int32]int64{})
			mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...)
			list := func() string {
				resp, err := e.s3.Do(t.Context(), "GET", "/lake?list-type=2&prefix=warehouse/lake.db/orders/", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return string(b)
			}
			if !strings.Contains(list(), "/metadata/") || !strings.Contains(list(), "/data/") {
				t.Fatalf("the table's location before the drop:\n%s", list())
			}
			mustFloe(t, "drop", "--table", "lake.orders", "--yes", "--catalog", e.catalog, "--warehouse", e.warehouse())
			if l := list(); strings.Contains(l, "<Key>") {
				t.Fatalf("the table's location after the drop:\n%s", l)
			}
			mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...)
		})
	}
}

// TestReportReverifyOnS3: the command an HTML audit report gives to audit
// the table again names the S3 endpoint and region the audit used (here
// from the AWS environment), so that it runs in a reviewer's shell that
// has credentials of its own and nothing else; it named the catalog only,
// and failed there for a table on S3 (from a new-user run).
func TestReportReverifyOnS3(t *testing.T) {
	e := newS3Env(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, e.brokers, "orders", 1, 10, map[int32]int64{})
	mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...)
	html := filepath.Join(t.TempDir(), "audit.html")
	mustFloe(t, "audit", "--table", "lake.orders", "--catalog", e.catalog, "--html", html)
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	start := strings.Index(page, "floe audit --table lake.orders")
	end := strings.Index(page[max(start, 0):], "&gt; audit.json")
	if start < 0 || end < 0 {
		t.Fatalf("no re-verify command in the report")
	}
	command := page[start : start+end]
	if !strings.Contains(command, "--s3-endpoint "+e.s3.Endpoint) || !strings.Contains(command, "--s3-region "+e.s3.Region) {
		t.Fatalf("re-verify command %q lacks the S3 endpoint and region", command)
	}
	// A reviewer's shell: credentials, no endpoint.
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_REGION", "")
	args := strings.Fields(strings.TrimPrefix(command, "floe "))
	digest := regexp.MustCompile(`"digest": *"([^"]+)"`)
	code, out, errs := floe(t, args...)
	want := digest.FindStringSubmatch(out)
	if code != exitOK || want == nil {
		t.Fatalf("floe %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	// The metadata file as Spark users name it (s3a://) is the same
	// version: the same digest, where it gave another.
	i := slices.Index(args, "--metadata-location")
	if i < 0 || !strings.HasPrefix(args[i+1], "s3://") {
		t.Fatalf("re-verify command %q names no s3:// metadata file", command)
	}
	args[i+1] = "s3a://" + strings.TrimPrefix(args[i+1], "s3://")
	code, out, errs = floe(t, args...)
	if got := digest.FindStringSubmatch(out); code != exitOK || got == nil || got[1] != want[1] {
		t.Fatalf("floe %s: exit %d, digest %v, want %s\n%s%s", strings.Join(args, " "), code, got, want[1], out, errs)
	}
}

// TestAuditMetadataLocationS3Schemes: s3://, s3a:// and s3n:// name the
// same object; --metadata-location of a table written at s3a:// (a Spark
// user's warehouse) given as s3:// gives the digest of the location as the
// table wrote it, as the reverse does (TestReportReverifyOnS3).
func TestAuditMetadataLocationS3Schemes(t *testing.T) {
	e := newS3Env(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, e.brokers, "orders", 1, 10, map[int32]int64{})
	warehouse := "s3a://" + e.bucket + "/warehouse"
	mustFloe(t, "sink", "--brokers", strings.Join(e.brokers, ","), "--topic", "orders", "--table", "lake.orders", "--catalog", e.catalog, "--warehouse", warehouse, "--stop-at-end")
	written := openTable(t, catalog.Config{Catalog: e.catalog, Warehouse: warehouse}, "lake.orders").Iceberg().MetadataLocation()
	if !strings.HasPrefix(written, "s3a://") {
		t.Fatalf("metadata location %s: want the s3a:// warehouse's", written)
	}
	digest := regexp.MustCompile(`"digest": *"([^"]+)"`)
	var want string
	for _, loc := range []string{written, "s3://" + strings.TrimPrefix(written, "s3a://"), "s3n://" + strings.TrimPrefix(written, "s3a://")} {
		code, out, errs := floe(t, "audit", "--table", "lake.orders", "--catalog", e.catalog, "--metadata-location", loc, "--json")
		got := digest.FindStringSubmatch(out)
		if code != exitOK || got == nil || (want != "" && got[1] != want) {
			t.Fatalf("audit --metadata-location %s: exit %d, digest %v, want %s\n%s%s", loc, code, got, want, out, errs)
		}
		want = got[1]
	}
}

// TestS3ReadsWithAWarehouseElsewhere: the commands that work on an
// existing table read it where its metadata says, so a warehouse for new
// tables whose bucket does not exist at the endpoint (a config file's,
// written for another store) is a warning, not the error it is to a sink
// that creates tables there: an audit of a table on another bucket exited
// 2 with "bucket does not exist" (from a new user's run).
func TestS3ReadsWithAWarehouseElsewhere(t *testing.T) {
	for _, f := range testenv.S3Servers() {
		t.Run(f.Name, func(t *testing.T) {
			e := newS3EnvOn(t, f.Start)
			if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
				t.Fatal(err)
			}
			produceRound(t, e.brokers, "orders", 1, 10, map[int32]int64{})
			mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...)
			elsewhere := []string{"--table", "lake.orders", "--catalog", e.catalog, "--warehouse", "s3://no-such-bucket/warehouse"}
			for _, cmd := range [][]string{
				{"audit"}, {"status"}, {"files"},
				{"where", "--topic", "orders", "--partition", "0", "--offset", "1"},
				{"as-of", "--offsets", "orders/0=3"},
			} {
				code, _, errs := floe(t, append(cmd, elsewhere...)...)
				if code != exitOK || !strings.Contains(errs, "the warehouse's bucket does not exist; going on") {
					t.Errorf("floe %s with a warehouse bucket that does not exist: exit %d, stderr:\n%s", cmd[0], code, errs)
				}
			}
			code, _, errs := floe(t, e.sinkArgs("orders", "lake.new", append([]string{"--stop-at-end"}, elsewhere[2:]...)...)...)
			if code != exitError || !strings.Contains(errs, "bucket does not exist") {
				t.Errorf("sink into a new table in a bucket that does not exist: exit %d, stderr:\n%s", code, errs)
			}
		})
	}
}

// TestS3TableOnAnotherServerNamesTheBucket: commands pointed at an S3
// endpoint that lacks the bucket the table is in (another server, a
// profile of another account) say that the bucket does not exist there,
// where they said the table's metadata file "does not exist", which reads
// like lost data (seen by a deployment walk-through).
func TestS3TableOnAnotherServerNamesTheBucket(t *testing.T) {
	for _, f := range testenv.S3Servers() {
		t.Run(f.Name, func(t *testing.T) {
			e := newS3EnvOn(t, f.Start)
			if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
				t.Fatal(err)
			}
			produceRound(t, e.brokers, "orders", 1, 10, map[int32]int64{})
			mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...)
			other := f.Start(t) // no bucket
			t.Setenv("AWS_ENDPOINT_URL_S3", other.Endpoint)
			t.Setenv("AWS_ACCESS_KEY_ID", other.AccessKey)
			t.Setenv("AWS_SECRET_ACCESS_KEY", other.SecretKey)
			for _, cmd := range [][]string{{"audit"}, {"status"}, {"files"}} {
				code, out, errs := floe(t, append(cmd, "--table", "lake.orders", "--catalog", e.catalog, "--warehouse", e.warehouse())...)
				if code != exitError || !strings.Contains(errs, `bucket does not exist: bucket "lake" at `+other.Endpoint) || !strings.Contains(errs, "check the S3 endpoint") {
					t.Errorf("floe %s against a server without the table's bucket: exit %d, want 2 naming the bucket\n%s%s", cmd[0], code, out, errs)
				}
			}
		})
	}
}
