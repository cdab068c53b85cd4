package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// S3Server is a real S3-compatible server in its own process, started by
// VersityGW, MinIO or Moto on a free port of 127.0.0.1 with its own data
// directory. Its root account (AccessKey, SecretKey) may do everything.
type S3Server struct {
	// Kind is the server: "versitygw", "minio" or "moto".
	Kind      string
	Endpoint  string // "http://127.0.0.1:PORT", path-style addressing
	AccessKey string
	SecretKey string
	Region    string // "us-east-1"
	// Dir is the server's data directory. For versitygw (posix backend)
	// each top-level directory is a bucket and each object "a/b/c" of
	// bucket B is the file Dir/B/a/b/c; MinIO keeps its own layout there;
	// moto keeps everything in memory and only runs in it.
	Dir  string
	Port int
	// ChecksSignatures is whether the server refuses a request signed with
	// a wrong secret or an unknown access key (versitygw and MinIO do;
	// moto accepts any credentials).
	ChecksSignatures bool
	// KeepsData is whether Stop and Start keep the buckets and objects
	// (versitygw and MinIO do; moto starts empty again).
	KeepsData bool

	t       testing.TB
	logPath string
	// command builds the server's command line for s.Port; its output
	// goes to the log.
	command func(s *S3Server) *exec.Cmd

	mu   sync.Mutex
	proc *process
}

// S3Flavor is one kind of S3 server a test can start.
type S3Flavor struct {
	Name  string                     // "versitygw", "minio", "moto"
	Start func(testing.TB) *S3Server // VersityGW, MinIO or Moto
}

// S3Servers lists the S3 servers floe's S3 suite runs on, each as a
// subtest named by Flavor.Name: versitygw (Apache-2.0, a gateway over a
// posix directory) and MinIO (the server most users run). moto is not
// among them: it accepts any credentials, so the error tests do not hold
// on it; the Glue suite starts it with Moto.
func S3Servers() []S3Flavor {
	return []S3Flavor{
		{Name: "versitygw", Start: VersityGW},
		{Name: "minio", Start: MinIO},
	}
}

// startS3 gives s a new root account (AccessKey, SecretKey), region
// us-east-1 and a t.TempDir() as its data directory, starts it on a free
// port, retrying when the port was taken between finding and binding it,
// and stops it in t.Cleanup.
func startS3(t testing.TB, s *S3Server) *S3Server {
	t.Helper()
	s.t = t
	s.AccessKey = "floetest" + randomHex(6)
	s.SecretKey = randomHex(20)
	s.Region = "us-east-1"
	s.Dir = t.TempDir()
	s.logPath = filepath.Join(t.TempDir(), s.Kind+".log")
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", s.Kind, s.logPath, tail(s.logPath, 4000))
		}
	})
	for attempt := 0; ; attempt++ {
		port, err := FreePort()
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
			t.Fatalf("testenv: start %s: %v", s.Kind, err)
		}
	}
}

// Stop kills the server at once (SIGKILL), as a server that disappears
// mid-request would; requests in flight fail. Stop is idempotent and safe
// from any goroutine.
func (s *S3Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.proc.stop(syscall.SIGKILL, 10*time.Second)
	s.proc = nil
}

// CPUTime returns the user and system CPU time the server's running
// process has used since it started, so that a benchmark can count the
// server's work beside its own. It is an error when the server is stopped
// or off Linux.
func (s *S3Server) CPUTime() (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.proc.exited() {
		return 0, fmt.Errorf("%s is not running", s.Kind)
	}
	d, err := processCPU(s.proc.cmd.Process.Pid)
	if err != nil {
		return 0, fmt.Errorf("CPU time of %s: %w", s.Kind, err)
	}
	return d, nil
}

// Start starts the server again after Stop, on the same port and directory
// with the same keys, and waits until it answers. It does nothing when the
// server runs. A failure fails the test with t.Errorf, so Start is safe to
// call from any goroutine.
func (s *S3Server) Start() {
	if err := s.start(); err != nil {
		s.t.Errorf("testenv: restart %s: %v", s.Kind, err)
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
	cmd := s.command(s)
	cmd.Stdout = logf
	cmd.Stderr = logf
	dieWithParent(cmd, syscall.SIGKILL)
	p, err := startProcess(cmd)
	if err != nil {
		return err
	}
	if err := s.waitReady(p, 60*time.Second); err != nil {
		p.stop(syscall.SIGKILL, time.Second)
		return fmt.Errorf("%v; log:\n%s", err, tail(s.logPath, 2000))
	}
	s.proc = p
	return nil
}

// waitReady polls the server with a signed ListBuckets until it answers
// 200, the process exits or the timeout passes. A server's health
// endpoints may answer before it serves requests (MinIO's
// /minio/health/ready does while its drive is still being set up, and
// the first CreateBucket gets a 503), and a signed request that succeeds
// is also one that another process which took the port between freePort
// and the server's bind would not answer.
func (s *S3Server) waitReady(p *process, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.exited() {
			return fmt.Errorf("server exited before answering: %v", p.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := s.Do(ctx, http.MethodGet, "/", nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			err = fmt.Errorf("ListBuckets answered %s", resp.Status)
			if resp.StatusCode == http.StatusOK {
				// MinIO serves its root account before its IAM is set
				// up, answering an unknown key 503 (not 403) meanwhile:
				// the tests of rejected credentials need the 403.
				if resp, err = s.doAs(ctx, http.MethodGet, "/", nil, "floe-unknown-key", "floe-unknown-secret"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusServiceUnavailable {
						cancel()
						return nil
					}
					err = fmt.Errorf("a request with an unknown key answered %s", resp.Status)
				}
			}
		}
		cancel()
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready at %s after %s: %v", s.Endpoint, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do sends a request signed with SigV4 by the root account. path is the
// path-style path ("/bucket/key"), optionally with a query ("/b?list-type=2").
func (s *S3Server) Do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	return s.doAs(ctx, method, path, body, s.AccessKey, s.SecretKey)
}

// doAs is Do signed with the given credentials.
func (s *S3Server) doAs(ctx context.Context, method, path string, body []byte, key, secret string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body == nil {
		req.Body = http.NoBody
		req.ContentLength = 0
	}
	signV4(req, body, key, secret, s.Region, time.Now())
	return http.DefaultClient.Do(req)
}

// CreateBucket creates bucket name with a signed CreateBucket request (the
// server then records the bucket's owner and ACL). It fails the test on
// error.
func (s *S3Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	resp, err := s.Do(context.Background(), http.MethodPut, "/"+name, nil)
	if err != nil {
		t.Fatalf("testenv: create bucket %q on %s: %v", name, s.Kind, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testenv: create bucket %q on %s: %s: %s", name, s.Kind, resp.Status, b)
	}
}
