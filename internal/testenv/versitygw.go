package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// VersityGWEnv names an environment variable that may hold the path of the
// versitygw binary to use.
const VersityGWEnv = "FLOE_VERSITYGW"

// S3Server is a versitygw S3 gateway serving a posix directory, started by
// VersityGW. Its root account (AccessKey, SecretKey) may do everything.
type S3Server struct {
	Endpoint  string // "http://127.0.0.1:PORT", path-style addressing
	AccessKey string
	SecretKey string
	Region    string // "us-east-1"
	// Dir is the posix backend's root: each top-level directory is a bucket
	// and each object "a/b/c" of bucket B is the file Dir/B/a/b/c.
	Dir  string
	Port int

	t       testing.TB
	bin     string
	logPath string

	mu   sync.Mutex
	proc *process
}

// VersityGW starts a throwaway versitygw S3 gateway in posix mode on a
// t.TempDir(), listening on a free port of 127.0.0.1, and stops it in
// t.Cleanup. The binary is $FLOE_VERSITYGW, else versitygw on PATH, else
// $(go env GOPATH)/bin/versitygw, else one built from tools/go.mod into the
// user cache directory (about a minute the first time, not under -short).
// When none can be had the test is skipped, or fails under
// FLOE_REQUIRE_SERVERS=1.
func VersityGW(t testing.TB) *S3Server {
	t.Helper()
	bin, err := versitygwBinary(t)
	if err != nil {
		unavailable(t, "no versitygw binary: %v", err)
	}
	s := &S3Server{
		AccessKey: "floetest" + randomHex(6),
		SecretKey: randomHex(20),
		Region:    "us-east-1",
		Dir:       t.TempDir(),
		t:         t,
		bin:       bin,
	}
	s.logPath = filepath.Join(t.TempDir(), "versitygw.log")
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("versitygw log (%s):\n%s", s.logPath, tail(s.logPath, 4000))
		}
	})
	// The free port may be taken between finding and binding it: retry.
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("testenv: free port: %v", err)
		}
		s.Port = port
		s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(port)
		err = s.start()
		if err == nil {
			return s
		}
		if attempt == 2 {
			t.Fatalf("testenv: start versitygw: %v", err)
		}
	}
}

// Stop kills the gateway at once (SIGKILL), as a server that disappears
// mid-request would; requests in flight fail. Stop is idempotent and safe
// from any goroutine.
func (s *S3Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.stop(syscall.SIGKILL, 10*time.Second)
	s.proc = nil
}

// Start starts the gateway again after Stop, on the same port and directory
// with the same keys, and waits until it answers. It does nothing when the
// gateway runs. A failure fails the test with t.Errorf, so Start is safe to
// call from any goroutine.
func (s *S3Server) Start() {
	if err := s.start(); err != nil {
		s.t.Errorf("testenv: restart versitygw: %v", err)
	}
}

func (s *S3Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && !s.proc.exited() {
		return nil
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- start %s\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.bin,
		"--port", "127.0.0.1:"+strconv.Itoa(s.Port),
		"--region", s.Region,
		"--quiet",
		"posix", s.Dir)
	cmd.Env = append(os.Environ(),
		"ROOT_ACCESS_KEY="+s.AccessKey,
		"ROOT_SECRET_KEY="+s.SecretKey,
	)
	cmd.Stdout = logf
	cmd.Stderr = logf
	dieWithParent(cmd, syscall.SIGKILL)
	p, err := startProcess(cmd)
	if err != nil {
		return err
	}
	if err := waitHTTP(s.Endpoint+"/", p, 30*time.Second); err != nil {
		p.stop(syscall.SIGKILL, time.Second)
		return fmt.Errorf("%v; log:\n%s", err, tail(s.logPath, 2000))
	}
	s.proc = p
	return nil
}

// waitHTTP polls url until it answers any HTTP response, the process exits
// or the timeout passes.
func waitHTTP(url string, p *process, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			return fmt.Errorf("server exited before answering: %v", p.err)
		}
		resp, err := client.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer at %s after %s: %v", url, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do sends a request signed with SigV4 by the root account. path is the
// path-style path ("/bucket/key"), optionally with a query ("/b?list-type=2").
func (s *S3Server) Do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body == nil {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	signV4(req, body, s.AccessKey, s.SecretKey, s.Region, time.Now())
	return http.DefaultClient.Do(req)
}

// CreateBucket creates bucket name with a signed CreateBucket request (the
// gateway then records the bucket's owner and ACL). It fails the test on
// error.
func (s *S3Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	resp, err := s.Do(context.Background(), http.MethodPut, "/"+name, nil)
	if err != nil {
		t.Fatalf("testenv: create bucket %q: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testenv: create bucket %q: %s: %s", name, resp.Status, b)
	}
}

// --- finding or building the binary ---

// versitygwMemo is the only package-level state of testenv, and it is
// needed: it makes the lookup (which runs `go env GOPATH`) and a build
// happen once per test process, and off Linux, where lockFile is a no-op,
// its mutex is what keeps parallel tests of one process from building
// versitygw at the same time (into the same temporary file). memo guards
// it: get holds its mutex while the lookup runs.
var versitygwMemo memo

// versitygwBinary finds or builds the versitygw binary, once per process.
// The outcome, a failure included, holds for the rest of the process.
func versitygwBinary(t testing.TB) (string, error) {
	return versitygwMemo.get(func() (string, error) {
		if p := os.Getenv(VersityGWEnv); p != "" {
			if !isExecutable(p) {
				return "", fmt.Errorf("%s=%s is not an executable file", VersityGWEnv, p)
			}
			return p, nil
		}
		if p, err := exec.LookPath("versitygw"); err == nil {
			return p, nil
		}
		goBin := goCommand()
		if p := filepath.Join(goPath(goBin), "bin", "versitygw"); isExecutable(p) {
			return p, nil
		}
		return buildVersityGW(t, goBin)
	})
}

// goCommand returns the go command: on PATH, else the one of the toolchain
// that built the test binary.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// goPath returns the first entry of `go env GOPATH`.
func goPath(goBin string) string {
	out, err := exec.Command(goBin, "env", "GOPATH").Output()
	gp := strings.TrimSpace(string(out))
	if err != nil || gp == "" {
		if gp = os.Getenv("GOPATH"); gp == "" {
			home, _ := os.UserHomeDir()
			gp = filepath.Join(home, "go")
		}
	}
	return filepath.SplitList(gp)[0]
}

var versitygwRequire = regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/versity/versitygw\s+(v\S+)`)

// buildVersityGW builds versitygw from tools/go.mod into
// os.UserCacheDir()/floe/versitygw-VERSION/versitygw, under a file lock so
// that parallel test processes build it once.
func buildVersityGW(t testing.TB, goBin string) (string, error) {
	toolsDir, err := findToolsDir()
	if err != nil {
		return "", fmt.Errorf("not on PATH, not in GOPATH/bin, and cannot build it: %v", err)
	}
	gomod, err := os.ReadFile(filepath.Join(toolsDir, "go.mod"))
	if err != nil {
		return "", err
	}
	m := versitygwRequire.FindSubmatch(gomod)
	if m == nil {
		return "", fmt.Errorf("%s/go.mod does not require github.com/versity/versitygw", toolsDir)
	}
	version := string(m[1])
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache dir to build versitygw into: %v", err)
	}
	dir := filepath.Join(cache, "floe", "versitygw-"+version)
	bin := filepath.Join(dir, "versitygw")
	if isExecutable(bin) {
		return bin, nil
	}
	if testing.Short() && !required() {
		return "", errors.New("not found, and -short does not build it (about a minute)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) { // built by another process while we waited
		return bin, nil
	}
	t.Logf("testenv: building versitygw %s from %s into %s (about a minute the first time)", version, toolsDir, dir)
	start := time.Now()
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(goBin, "build", "-o", tmp, "github.com/versity/versitygw/cmd/versitygw")
	cmd.Dir = toolsDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build versitygw %s in %s: %v\n%s", version, toolsDir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	t.Logf("testenv: built versitygw in %s", time.Since(start).Round(time.Second))
	return bin, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
