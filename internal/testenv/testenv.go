package testenv

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// RequireServersEnv is the environment variable that turns a missing server
// from a skip into a failure when it is set to "1".
const RequireServersEnv = "FLOE_REQUIRE_SERVERS"

// required reports whether missing servers must fail the test.
func required() bool { return os.Getenv(RequireServersEnv) == "1" }

// unavailable skips the test because a server cannot be had, or fails it
// when FLOE_REQUIRE_SERVERS=1.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if required() {
		t.Fatalf("testenv: %s (%s=1, so this is a failure; .ci/install-servers.sh installs the servers)", msg, RequireServersEnv)
	}
	t.Skipf("testenv: %s (skipping; .ci/install-servers.sh installs the servers, %s=1 makes this a failure)", msg, RequireServersEnv)
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago,
// below the ephemeral range (32768 and up on Linux): a port the kernel
// picks for a listener is one it also gives outgoing connections, and one
// took a test's port between the pick and the server's bind (CI's floe
// localstack up: "address already in use ... the local port of an outgoing
// connection holds it").
func FreePort() (int, error) {
	var err error
	for range 100 {
		port := 20_000 + rand.IntN(12_000)
		var l net.Listener
		if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port in 20000-31999 after 100 tries: %w", err)
}

// process is a running server child process.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the result of Wait, set before done is closed
}

// startProcess starts cmd and reaps it in the background.
func startProcess(cmd *exec.Cmd) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig, waits up to grace for the process to exit and then kills it.
func (p *process) stop(sig os.Signal, grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// tail returns the last n bytes of the file at path, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	return strings.TrimSpace(string(buf))
}

// findToolsDir walks up from the working directory to the directory holding
// tools/go.mod of module github.com/floe-dev/floe/tools.
func findToolsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		gomod := filepath.Join(dir, "tools", "go.mod")
		if b, err := os.ReadFile(gomod); err == nil && strings.Contains(string(b), "module github.com/floe-dev/floe/tools") {
			return filepath.Dir(gomod), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no tools/go.mod found above the working directory")
		}
		dir = parent
	}
}

// memo caches the result of a lookup for the life of the test binary.
type memo struct {
	mu   sync.Mutex
	done bool
	val  string
	err  error
}

func (m *memo) get(f func() (string, error)) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.done {
		m.val, m.err = f()
		m.done = true
	}
	return m.val, m.err
}

// isExecutable reports whether path is a regular file with an execute bit.
// findBinary returns the server binary to use: $env when it is set (then
// it must be an executable file), else name on PATH, else the first of
// paths that is an executable file. It returns "" and no error when there
// is none: the caller says where it should have been, or builds it.
func findBinary(env, name string, paths ...string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if !isExecutable(p) {
			return "", fmt.Errorf("%s=%s is not an executable file", env, p)
		}
		return p, nil
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, p := range paths {
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
