package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

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
	if !strings.Contains(last, "floe: interrupted before the end offsets: lake.big at big/") ||
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
