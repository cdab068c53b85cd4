package testenv

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestProcessCPU burns about 200 ms of CPU and reads this process's CPU
// time from /proc as S3Server.CPUTime does for a server's.
func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	cpu := func() time.Duration {
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for start := cpu(); cpu()-start < 200*time.Millisecond; {
	}
	after, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Ticks are 10 ms: allow for two at either end.
	if d := after - before; d < 160*time.Millisecond {
		t.Errorf("processCPU grew by %s over 200 ms of CPU", d)
	}
}

func TestAWSEscape(t *testing.T) {
	for in, want := range map[string]string{
		"/b/a b/ü~x.y_z-": "/b/a%20b/%C3%BC~x.y_z-",
		"k=v&x":           "k%3Dv%26x",
	} {
		if got := awsEscape(in, strings.HasPrefix(in, "/")); got != want {
			t.Errorf("awsEscape(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSignV4KnownAnswer checks the signer against the examples of AWS's
// "Signature Calculations for the Authorization Header" for S3.
func TestSignV4KnownAnswer(t *testing.T) {
	now, _ := time.Parse("20060102T150405Z", "20130524T000000Z")
	for url, want := range map[string]string{
		"https://examplebucket.s3.amazonaws.com/?lifecycle":           "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		"https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J": "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
	} {
		req, _ := http.NewRequest("GET", url, nil)
		signV4(req, nil, "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", now)
		got := req.Header.Get("Authorization")
		if want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
			"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + want; got != want {
			t.Errorf("%s:\n got %s\nwant %s", url, got, want)
		}
	}
}

// TestS3Servers starts each S3 server, moto's too, and checks what the
// suites rely on: signatures are checked (but by moto), buckets and objects
// work over path-style addressing with keys that need escaping, and a
// server that keeps its data has it again after Stop and Start.
func TestS3Servers(t *testing.T) {
	for _, f := range append(S3Servers(), S3Flavor{Name: "moto", Start: Moto}) {
		t.Run(f.Name, func(t *testing.T) {
			start := time.Now()
			s := f.Start(t)
			t.Logf("%s ready in %s", f.Name, time.Since(start).Round(time.Millisecond))
			checkS3Server(t, s)
		})
	}
}

func checkS3Server(t *testing.T, s *S3Server) {
	if !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") || s.Region != "us-east-1" || s.AccessKey == "" || s.SecretKey == "" {
		t.Fatalf("bad server fields: %+v", s)
	}

	if s.ChecksSignatures {
		// Unsigned requests are refused.
		resp, err := http.Get(s.Endpoint + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("unsigned GET /: %s, want 403", resp.Status)
		}

		// A wrong secret is refused: the server checks signatures.
		req, _ := http.NewRequest("GET", s.Endpoint+"/", nil)
		signV4(req, nil, s.AccessKey, "wrong", s.Region, time.Now())
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("GET / with a wrong secret: %s, want 403", resp.Status)
		}
	}

	s.CreateBucket(t, "warehouse")
	if s.Kind == "versitygw" {
		if st, err := os.Stat(filepath.Join(s.Dir, "warehouse")); err != nil || !st.IsDir() {
			t.Fatalf("bucket directory: %v", err)
		}
	}
	do := func(method, path string, body []byte, want int) string {
		t.Helper()
		resp, err := s.Do(context.Background(), method, path, body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %s, want %d: %s", method, path, resp.Status, want, b)
		}
		return string(b)
	}
	if got := do("GET", "/", nil, 200); !strings.Contains(got, "<Name>warehouse</Name>") {
		t.Fatalf("ListBuckets does not list warehouse: %s", got)
	}
	key := "/warehouse/lake/events/data/a b+c=1.parquet"
	do("PUT", key, []byte("hello"), 200)
	if s.Kind == "versitygw" {
		if b, err := os.ReadFile(filepath.Join(s.Dir, "warehouse", "lake/events/data/a b+c=1.parquet")); err != nil || string(b) != "hello" {
			t.Fatalf("object file: %q, %v", b, err)
		}
	}
	if got := do("GET", key, nil, 200); got != "hello" {
		t.Fatalf("GET object = %q", got)
	}
	if got := do("GET", "/warehouse?list-type=2&prefix="+url.QueryEscape("lake/events/"), nil, 200); !strings.Contains(got, "<Key>lake/events/data/a b+c=1.parquet</Key>") {
		t.Fatalf("ListObjectsV2: %s", got)
	}

	if s.Kind == "versitygw" {
		// A top-level directory made by hand is a bucket too.
		if err := os.Mkdir(filepath.Join(s.Dir, "byhand"), 0o755); err != nil {
			t.Fatal(err)
		}
		do("PUT", "/byhand/x", []byte("x"), 200)
	}

	if d, err := s.CPUTime(); err != nil || d < 0 {
		t.Errorf("CPUTime = %s, %v", d, err)
	}

	// Stop makes it vanish; Start brings it back on the same port, with
	// the data where the server keeps it.
	s.Stop()
	if _, err := http.Get(s.Endpoint + "/"); err == nil {
		t.Fatal("server still answers after Stop")
	}
	s.Stop() // idempotent
	if _, err := s.CPUTime(); err == nil {
		t.Error("CPUTime of a stopped server: no error")
	}
	start := time.Now()
	s.Start()
	t.Logf("%s restarted in %s", s.Kind, time.Since(start).Round(time.Millisecond))
	if s.KeepsData {
		if got := do("GET", key, nil, 200); got != "hello" {
			t.Fatalf("GET object after restart = %q", got)
		}
	} else {
		do("GET", key, nil, 404)
	}
}

func TestPostgres(t *testing.T) {
	start := time.Now()
	p := Postgres(t)
	t.Logf("postgres ready in %s", time.Since(start).Round(time.Millisecond))
	u, err := url.Parse(p.URI)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := u.User.Password()
	if u.Scheme != "postgres" || u.Host != "127.0.0.1:"+strconv.Itoa(p.Port) || u.User.Username() != p.User || pw != p.Password ||
		u.Path != "/"+p.Database || u.Query().Get("sslmode") != "disable" {
		t.Fatalf("bad URI %q", p.URI)
	}
	conn, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := probePostgres(u.Host, p.User, p.Database); err != nil {
		t.Fatalf("protocol handshake: %v", err)
	}

	if isready := filepath.Join(p.binDir, "pg_isready"); isExecutable(isready) {
		if out, err := exec.Command(isready, "-h", p.Host, "-p", strconv.Itoa(p.Port), "-d", p.Database, "-U", p.User).CombinedOutput(); err != nil {
			t.Fatalf("pg_isready: %v: %s", err, out)
		}
	}
	psql := filepath.Join(p.binDir, "psql")
	if !isExecutable(psql) {
		t.Log("no psql: checked TCP and the protocol handshake only")
		return
	}
	query := func(uri, sql string) (string, error) {
		out, err := exec.Command(psql, uri, "-XAtc", sql).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	// Password auth over TCP with the URI as given.
	if got, err := query(p.URI, "select current_database() || ' ' || current_user"); err != nil || got != p.Database+" "+p.User {
		t.Fatalf("psql: %q, %v", got, err)
	}
	if _, err := query(p.URI, "create table t (x int); insert into t values (42)"); err != nil {
		t.Fatal(err)
	}
	wrong := strings.Replace(p.URI, ":"+p.Password+"@", ":wrong@", 1)
	if got, err := query(wrong, "select 1"); err == nil {
		t.Fatalf("wrong password accepted: %q", got)
	}

	// Stop and Start keep the data.
	p.Stop()
	if _, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
		t.Fatal("port still open after Stop")
	}
	p.Start()
	if got, err := query(p.URI, "select x from t"); err != nil || got != "42" {
		t.Fatalf("after restart: %q, %v", got, err)
	}
}

func TestUnavailableSkips(t *testing.T) {
	if required() {
		t.Skip("FLOE_REQUIRE_SERVERS=1")
	}
	t.Setenv(PostgresBinEnv, t.TempDir())
	ran := false
	t.Run("missing", func(t *testing.T) {
		Postgres(t)
		ran = true
	})
	if ran {
		t.Fatal("Postgres returned without binaries")
	}
}

// TestMemoOnce checks that concurrent gets run the lookup once and all get
// its result, a failure included.
func TestMemoOnce(t *testing.T) {
	for _, want := range []error{nil, errors.New("no binary")} {
		var (
			m     memo
			calls atomic.Int32
			wg    sync.WaitGroup
		)
		for range 16 {
			wg.Go(func() {
				v, err := m.get(func() (string, error) {
					calls.Add(1)
					time.Sleep(20 * time.Millisecond) // a lookup that takes a while
					return "/bin/versitygw", want
				})
				if v != "/bin/versitygw" || err != want {
					t.Errorf("get = %q, %v; want /bin/versitygw, %v", v, err, want)
				}
			})
		}
		wg.Wait()
		if n := calls.Load(); n != 1 {
			t.Fatalf("lookup ran %d times, want once", n)
		}
	}
}

// TestNetNS makes two hosts, serves on this host's bridge address (directly
// and through Forward), and checks from inside a namespace that both are
// reachable, that a cut host reaches neither while the other still does,
// and that a healed one reaches them again.
func TestNetNS(t *testing.T) {
	h := NetNS(t, 2)
	// listen serves on addr, accepting and closing every connection.
	listen := func(addr string) net.Listener {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		return l
	}
	l := listen(net.JoinHostPort(h.Addr, "0"))
	local := listen("127.0.0.1:0")
	forwarded := h.Forward(local.Addr().String())
	reaches := func(host int, addr string) bool {
		ip, port, _ := net.SplitHostPort(addr)
		argv := h.Command(host, "timeout", "2", "bash", "-c", "exec 3<>/dev/tcp/"+ip+"/"+port)
		return exec.Command(argv[0], argv[1:]...).Run() == nil
	}
	for host := range 2 {
		for _, addr := range []string{l.Addr().String(), forwarded} {
			if !reaches(host, addr) {
				t.Fatalf("host %d (%s) cannot reach %s", host, h.HostAddrs[host], addr)
			}
		}
	}
	h.Cut(0)
	if reaches(0, l.Addr().String()) || reaches(0, forwarded) {
		t.Fatal("a cut host still reaches this host")
	}
	if !reaches(1, l.Addr().String()) {
		t.Fatal("cutting host 0 cut host 1 off too")
	}
	h.Heal(0)
	// An ARP or SYN lost as the link came back is sent again after a
	// second, so a healed host is given a few tries.
	for try := 1; !reaches(0, forwarded); try++ {
		if try == 4 {
			t.Fatal("a healed host does not reach this host")
		}
	}
}
