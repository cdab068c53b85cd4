package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// TestMaintainSetsRetention (from a new-user run): the snapshot retention
// a sink's own expiry reads (history.expire.*, floe.history.max-snapshots)
// could be set only with Spark or PyIceberg. floe maintain --set-* sets it
// in the table (a dry run says what it would set and sets nothing), and
// refuses values that make no sense, naming the flag.
func TestMaintainSetsRetention(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc)...)
	maintain := func(extra ...string) (int, string, string) {
		return floe(t, slices.Concat([]string{"maintain", "--table", "lake.orders"}, extra, loc)...)
	}
	props := func() map[string]string { return openTable(t, st.Catalog(), "lake.orders").Iceberg().Properties() }
	want := map[string]string{"history.expire.max-snapshot-age-ms": "86400000", "history.expire.min-snapshots-to-keep": "7", snapshot.PropMaxSnapshots: "0"}
	args := []string{"--set-max-snapshot-age", "24h", "--set-min-snapshots", "7", "--set-max-snapshots", "0"}
	code, out, errs := maintain(append(args, "--dry-run")...)
	if code != exitOK || !strings.Contains(out, "retention: would set floe.history.max-snapshots=0, history.expire.max-snapshot-age-ms=86400000, history.expire.min-snapshots-to-keep=7") {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errs)
	}
	for k := range want {
		if v, ok := props()[k]; ok {
			t.Fatalf("the dry run set %s=%s", k, v)
		}
	}
	if code, out, errs := maintain(args...); code != exitOK || !strings.Contains(out, "retention: set ") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	got := props()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("property %s = %q, want %q", k, got[k], v)
		}
	}
	for _, c := range []struct{ flag, value string }{{"--set-max-snapshot-age", "0s"}, {"--set-min-snapshots", "0"}, {"--set-max-snapshots", "-1"}} {
		if code, _, errs := maintain(c.flag, c.value); code != exitError || !strings.Contains(errs, c.flag) {
			t.Errorf("%s %s: exit %d, %s; want refused naming the flag", c.flag, c.value, code, errs)
		}
	}
}
