package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestSinkSummaryAfterDropKeepFiles (from a new user): a live sink
// whose table's catalog entry is removed with its files kept (floe drop
// --keep-files, or another tool's DROP TABLE without purge) stops at its
// next commit, as it should, but its summary says what it committed is
// "gone with the dropped table" and its error advises "run again under the
// old name, a sink would start a new table from --start". Neither is so:
// the files, ledger included, are all there; a sink run again under the old
// name is refused ("table location is owned by another catalog"), and
// floe register --table NAME --location LOCATION puts the table back with
// everything committed (docs/deployment.md, recovering from mistakes). The
// summary should not call the rows gone when the files were kept, and the
// error should name floe register.
func TestSinkSummaryAfterDropKeepFiles(t *testing.T) {
	st, loc := sinkStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.t", "--flush-interval", "200ms", "--lag-interval", "1s"}, loc...)...)
	waitFor(t, 20*time.Second, "the live sink's first rows", func() bool {
		code, out, _ := floe(t, append([]string{"files", "--table", "lake.t"}, loc[:2]...)...)
		return code == 0 && strings.Contains(out, ".parquet")
	})
	mustFloe(t, append([]string{"drop", "--table", "lake.t", "--keep-files", "--yes"}, loc[:2]...)...)
	r := produceUntilStopped(ctx, t, st, done)
	msg := ""
	if r.err != nil {
		msg = withFlags(r.err)
	}
	if r.err == nil || strings.Contains(r.out, "gone with the dropped table") || !strings.Contains(msg, "floe register") {
		t.Errorf("live sink after floe drop --keep-files: %q\nstdout:\n%s\nwant a summary that does not call the committed rows gone, and an error naming floe register", msg, r.out)
	}
}
