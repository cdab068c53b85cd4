package main

import (
	"slices"
	"strings"
	"testing"
)

// TestAsOfExpiredPrintsReplay (from a new-user run): as-of --rows at an
// expired snapshot of an upsert table prints the whole floe replay command
// that rebuilds it (topic, a new table, --until the position, the table's
// layout flags), not only "floe replay --until the position", and that
// command, run as printed, rebuilds the state as of the position.
func TestAsOfExpiredPrintsReplay(t *testing.T) {
	st, loc := keyedStack(t, "lake.u")
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.u", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.u", "--offsets", "u/0=8", "--rows"}, loc)...)
	const want = "rebuild it into a new table with: floe replay -t u --table lake.u_at --until 0=8 --mode upsert --key string --value raw"
	if code != exitError || !strings.Contains(errs, "has expired") || !strings.HasSuffix(strings.TrimSpace(errs), want) {
		t.Fatalf("as-of at an expired snapshot: exit %d\n%s\n%s\nwant it to end with %q", code, out, errs, want)
	}
	replay := strings.Fields(strings.TrimPrefix(want, "rebuild it into a new table with: floe "))
	mustFloe(t, slices.Concat(replay, []string{"-b", st.Brokers[0]}, loc)...)
	out = mustFloe(t, slices.Concat([]string{"as-of", "--table", "lake.u_at", "--offsets", "u/0=8", "--rows"}, loc)...)
	if !strings.Contains(out, "u/0 below offset 8 (given): a commit boundary") || !strings.Contains(out, "\n4 rows") {
		t.Fatalf("as-of the rebuilt table:\n%s", out)
	}
}
