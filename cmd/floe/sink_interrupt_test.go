package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestStopAtEndInterrupted (from a new-user run): a floe sink
// --stop-at-end that SIGTERM (a scheduler's timeout) or SIGINT stops
// before its end offsets exited 0 with a summary like a finished run's: a
// batch job that did part of its work recorded as done. It commits what
// it consumed, says which partitions it did not finish and exits 2; its
// JSON report has them under unfinished. Run again, it finishes.
func TestStopAtEndInterrupted(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "big", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("big", 2, 20000, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "big", "--table", "lake.big",
		"--stop-at-end", "--json", "--log-format", "json", "--flush-records", "10"}, loc...)
	code, stdout, lines := signalledSink(t, args, func(line string) bool {
		return strings.Contains(line, `"msg":"committed"`) && !strings.Contains(line, `"rows":0`)
	})
	if code != 2 {
		t.Fatalf("interrupted run: exit %d, want 2\nstdout: %s\nstderr:\n%s", code, stdout, strings.Join(lines, "\n"))
	}
	last := lines[len(lines)-1]
	// The last line is a JSON record, as the run logs (--log-format json).
	if !strings.Contains(last, `"msg":"interrupted before the end offsets: lake.big at big/`) || !strings.Contains(last, `"exit_code":2`) ||
		!strings.Contains(last, "run the same command again to continue") {
		t.Fatalf("last stderr line %q, want the partitions not finished", last)
	}
	var rep runReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("report %q: %v", stdout, err)
	}
	if len(rep.Unfinished) == 0 || rep.Rows == 0 || rep.Rows >= 40000 {
		t.Fatalf("report %+v: want rows committed and the partitions not finished", rep)
	}
	for tp, end := range rep.Unfinished {
		if rep.Next[tp] >= end {
			t.Fatalf("unfinished %s at %d of %d", tp, rep.Next[tp], end)
		}
	}
	// The next run finishes, exit 0, with nothing unfinished.
	code, out, errs := floe(t, append(args[:len(args)-len(loc)-2], loc...)...)
	var again runReport
	if err := json.Unmarshal([]byte(out), &again); code != 0 || err != nil || len(again.Unfinished) > 0 || again.Next["big/0"]+again.Next["big/1"] != 20000 {
		t.Fatalf("second run: exit %d\n%s%s", code, out, errs)
	}
}

// signalledSink runs the CLI as a child process with args (JSON logs on
// stderr), sends it SIGTERM at the first stderr line at matches, and
// returns its exit code, its stdout and its stderr lines.
func signalledSink(t *testing.T, args []string, at func(line string) bool) (int, string, []string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stderr)
	signalled := false
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if !signalled && at(sc.Text()) {
			signalled = true
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if !signalled {
		t.Fatalf("the run ended before the line to signal it at:\n%s", strings.Join(lines, "\n"))
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), lines
}

// freezer is a TCP proxy that forwards to target until frozen, then
// takes connections and never answers: a storage that hangs.
type freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns = append(f.conns, c)
			frozen := f.frozen
			f.mu.Unlock()
			if frozen {
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, up)
			f.mu.Unlock()
			go io.Copy(up, c)
			go io.Copy(c, up)
		}
	}()
	return f
}

// freeze cuts the connections it forwards and holds every new one.
func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen = true
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
}

// TestSecondSignalExitsAtOnce (from an operator's run): a sink stopped by
// SIGTERM commits what it consumed, and when the storage hangs then (a
// frozen S3 endpoint) that commit waits, up to its 10-minute timeout:
// later signals were swallowed, and nothing was logged. The first signal
// is logged, saying a second one exits at once, which it does (nothing
// committed is lost; a run again resumes from the ledger).
func TestSecondSignalExitsAtOnce(t *testing.T) {
	dir := t.TempDir()
	l, err := localstack.Up(t.Context(), localstack.UpOptions{Dir: dir, KafkaPort: freeTCPPort(t), S3Port: freeTCPPort(t), RegistryPort: freeTCPPort(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := localstack.CreateTopic(t.Context(), l.Brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	s3 := newFreezer(t, strings.TrimPrefix(l.S3.Endpoint, "http://"))
	cmd := exec.Command(os.Args[0], "sink", "--brokers", l.Brokers[0], "--topic", "orders", "--table", "lake.orders",
		"--catalog", l.CatalogPath(), "--warehouse", l.Warehouse(), "--s3-endpoint", "http://"+s3.ln.Addr().String(),
		"--s3-access-key-id", localstack.AccessKeyID, "--s3-secret-access-key", localstack.SecretAccessKey, "--flush-interval", "1h")
	cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr floetest.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "sink session started"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no session in 30 s; log:\n%s", stderr.String())
		}
	}
	produceRound(t, l.Brokers, "orders", 1, 5, map[int32]int64{})
	time.Sleep(time.Second) // consumed, not committed (--flush-interval 1h)
	s3.freeze()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Fatalf("the sink stopped at the first signal with its storage frozen (%v): the test needs its commit to hang; log:\n%s", err, stderr.String())
	case <-time.After(3 * time.Second):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("a second SIGTERM did not end the process; log:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "a second signal exits at once") {
		t.Errorf("the first signal was not logged:\n%s", stderr.String())
	}
}

// TestStoppingLineFitsTheCommand: the line a signal logs speaks of
// committing what was consumed only for commands that consume; a local
// stack's said a sink commits (found by a new user).
func TestStoppingLineFitsTheCommand(t *testing.T) {
	port := func() string { return strconv.Itoa(freeTCPPort(t)) }
	cmd := exec.Command(os.Args[0], "localstack", "up", "--dir", t.TempDir(), "--kafka-port", port(), "--s3-port", port(), "--schema-registry-port", port())
	cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr floetest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stdout.String(), "floe local stack is up"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no stack in 30 s:\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if log := stderr.String(); !strings.Contains(log, "stopping: a second signal exits at once") || strings.Contains(log, "consumed") {
		t.Errorf("stop line of a local stack:\n%s", log)
	}
}
