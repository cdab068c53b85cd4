package main

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLagIntervalZeroIsABadValue (from a new user): `floe sink
// --lag-interval 0` (an operator reading "0 turns it off" from
// --compact-interval's help, say) crashed the sink with a Go panic from a
// goroutine, "panic: non-positive interval for NewTicker" and a stack trace,
// with or without --metrics-addr. Every other interval flag of floe sink
// (--flush-interval, --topic-check, --rebalance-timeout, --session-timeout)
// refuses a value that is not above 0 with the usual one-line error, exit 2,
// before anything is done. The sink runs as a separate process: the panic is
// in a goroutine and would take the test binary down.
func TestLagIntervalZeroIsABadValue(t *testing.T) {
	st, loc := sinkStack(t)
	bin := buildFloe(t)
	for _, v := range []string{"0", "-5s"} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "orders",
			"--table", "lake.orders", "--stop-at-end", "--lag-interval", v}, loc...)...)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		code := 0
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		}
		if strings.Contains(string(out), "panic:") || code != 2 || !strings.Contains(string(out), "--lag-interval") {
			t.Errorf("floe sink --lag-interval %s: exit %d (%v)\n%s\nwant exit 2 and a one-line error naming --lag-interval, as --flush-interval 0 gets", v, code, err, lastLines(string(out), 12))
		}
	}
}
