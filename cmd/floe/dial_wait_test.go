package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// heldPort is a loopback port on which connections are refused until
// release: a socket bound to it but not listening holds it, so that no
// server a parallel test starts takes it before the test's broker does.
func heldPort(t *testing.T) (port int, release func()) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	closed := false
	release = func() {
		if !closed {
			closed = true
			syscall.Close(fd)
		}
	}
	t.Cleanup(release)
	return sa.(*syscall.SockaddrInet4).Port, release
}

// TestDialTimeoutWaitsForBrokers (from users running floe beside Kafka
// in Kubernetes and Docker Compose): a command started while the broker's
// port still refused connections exited at once with "cannot reach
// brokers", so that a sink crash-looped. Every command that dials waits
// up to --dial-timeout for the brokers to take connections, saying once
// that it waits and for which brokers; with none in that time it fails
// with the error it gave at once.
func TestDialTimeoutWaitsForBrokers(t *testing.T) {
	port, release := heldPort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dataDir := t.TempDir()
	var cluster *kfake.Cluster
	startBroker := func() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dataDir), kfake.SeedTopics(1, "orders"))
		if err != nil {
			t.Fatalf("start broker on %s: %v", addr, err)
		}
		cluster = c
	}
	t.Cleanup(func() {
		if cluster != nil {
			cluster.Close()
		}
	})
	_, catFlags := localCatalog(t)
	// waits runs floe with args against addr, whose broker starts 1.5 s
	// later, and wants it to succeed having said once that it waits.
	waits := func(args ...string) {
		t.Helper()
		type result struct {
			code      int
			out, errs string
		}
		done := make(chan result, 1)
		go func() {
			code, out, errs := floe(t, append(append(args, "--brokers", addr, "--dial-timeout", "30s"), catFlags...)...)
			done <- result{code, out, errs}
		}()
		select {
		case r := <-done:
			t.Fatalf("floe %s ended before the broker started: exit %d\n%s\n%s", args[0], r.code, r.out, r.errs)
		case <-time.After(1500 * time.Millisecond):
		}
		release()
		startBroker()
		r := <-done
		if r.code != exitOK {
			t.Fatalf("floe %s against a broker started 1.5s after it: exit %d\n%s\n%s", args[0], r.code, r.out, r.errs)
		}
		if n := strings.Count(r.errs, "waiting for the brokers"); n != 1 || !strings.Contains(r.errs, addr) {
			t.Errorf("floe %s: want one line saying it waits for the brokers, naming %s; stderr:\n%s", args[0], addr, r.errs)
		}
		cluster.Close()
		cluster = nil
	}
	waits("sink", "--topic", "orders", "--table", "lake.orders", "--stop-at-end")
	waits("audit", "--table", "lake.orders")
	waits("status", "--table", "lake.orders")

	// No broker at all: the clear error, after --dial-timeout.
	dead := refusedTCPAddr(t)
	for _, args := range [][]string{
		{"sink", "--topic", "orders", "--table", "lake.orders", "--stop-at-end"},
		{"audit", "--table", "lake.orders"},
		{"where", "--table", "lake.orders", "--topic", "orders", "--partition", "0", "--offset", "0"},
	} {
		start := time.Now()
		code, _, errs := floe(t, append(append(args, "--brokers", dead, "--dial-timeout", "1s"), catFlags...)...)
		took := time.Since(start)
		want := "cannot reach brokers " + dead + " (none took a connection within 1s; is Kafka running there?)"
		if line := errorLine(errs); code != exitError || !strings.Contains(line, want) || !strings.Contains(line, "check --brokers") {
			t.Errorf("floe %s with no broker: exit %d, error line\n%s\nwant exit %d and %q", args[0], code, line, exitError, want)
		}
		if took < time.Second || took > 8*time.Second {
			t.Errorf("floe %s with no broker and --dial-timeout 1s took %s", args[0], took)
		}
	}
}
