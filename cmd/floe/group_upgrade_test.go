package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// oldFloe builds floe as of commit rev from this repository's history
// (git archive; skipped without it), or takes the binary FLOE_OLD_FLOE
// names.
func oldFloe(t *testing.T, rev string) string {
	t.Helper()
	if bin := os.Getenv("FLOE_OLD_FLOE"); bin != "" {
		return bin
	}
	src := t.TempDir()
	archive := exec.CommandContext(t.Context(), "sh", "-c", "cd \"$(git rev-parse --show-toplevel)\" && git archive "+rev+" | tar -x -C "+src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Skipf("no git history to build floe %s from: %v\n%s", rev, err, out)
	}
	bin := filepath.Join(t.TempDir(), "floe-old")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/floe")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build floe %s: %v\n%s", rev, err, out)
	}
	return bin
}

// TestGroupRollingUpgradeToTableUUIDClientIDs (from a review): the client
// id gained the table's UUID (floe:TABLE@UUID). A floe before it compares a
// member's whole client id after "floe/" with its own table name: with
// that prefix kept, it read an upgraded member of its own table as one
// sinking another table ("lake.orders@<uuid>") and stopped at its next
// assignment, so a rolling upgrade (one member at a time, as
// docs/deployment.md says) stopped the members not upgraded yet. Here an
// old member joins a group that has an upgraded one, and must sink.
func TestGroupRollingUpgradeToTableUUIDClientIDs(t *testing.T) {
	old := oldFloe(t, "6070f5e^")
	st := ordersStack(t)
	_, catFlags := localCatalog(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	args := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--group", "shared",
		"--session-timeout", "6s", "--rebalance-timeout", "10s", "--retry-for", "0s", "--flush-interval", "200ms"}, catFlags...)
	upgraded := liveFloe(ctx, args...)
	defer func() {
		cancel()
		<-upgraded
	}()
	if !waitForOK(30*time.Second, func() bool {
		code, out, _ := floe(t, append([]string{"files", "--table", "lake.orders"}, catFlags[:2]...)...)
		return code == 0 && strings.Contains(out, ".parquet")
	}) {
		code, out, errs := floe(t, append([]string{"files", "--table", "lake.orders"}, catFlags[:2]...)...)
		cancel()
		r := <-upgraded
		ch := make(chan floeRun, 1)
		ch <- r
		upgraded = ch
		t.Fatalf("the upgraded member committed nothing in 30 s: files exit %d\n%s\n%s\nmember: %v\n%s", code, out, errs, r.err, lastLines(r.errs, 10))
	}
	// The member not upgraded yet, of the same table and catalog.
	octx, ocancel := context.WithTimeout(ctx, 25*time.Second)
	defer ocancel()
	cmd := exec.CommandContext(octx, old, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	if octx.Err() == nil {
		t.Fatalf("a member of floe before 6070f5e (same table, catalog and group as an upgraded member) stopped within 25 s: %v\n%s", err, lastLines(stderr.String(), 6))
	}
}
