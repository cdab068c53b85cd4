package main

import (
	"slices"
	"strings"
	"testing"
)

// TestExpiredSnapshotNotes (from a new user's run): after snapshot expiry,
// floe as-of without --rows said the table no longer held the rows of an
// append table's expired snapshot and to replay them, where --rows
// exported them from the current snapshot; and floe where named an expired
// snapshot without saying it had expired. Both say it, in one wording.
func TestExpiredSnapshotNotes(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "50", "--maintain=false"}, loc)...)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.orders", "--expire-older-than", "0s", "--retain-last", "1"}, loc)...)
	lookup := func(args ...string) string {
		t.Helper()
		return mustFloe(t, slices.Concat(args, []string{"--table", "lake.orders"}, loc)...)
	}
	const same = "(expired: snapshot expiry removed it; its rows are the current snapshot's below the position, the same rows, since floe's commits only add rows to the table"
	all := "orders/0=5,orders/1=5,orders/2=5"
	if out := lookup("as-of", "--offsets", all); !strings.Contains(out, same+", and --rows exports them; a writer other than floe") || strings.Contains(out, "replay") {
		t.Errorf("as-of an expired snapshot without --rows:\n%s", out)
	}
	if out := lookup("as-of", "--offsets", all, "--rows"); !strings.Contains(out, same+"; a writer other than floe") || !strings.Contains(out, "\n15 rows") {
		t.Errorf("as-of an expired snapshot with --rows:\n%s", out)
	}
	// A position that leaves out partitions: --rows cannot read it from
	// the current snapshot, and the note says so.
	if out := lookup("as-of", "--offsets", "orders/0=5"); !strings.Contains(out, "(expired: snapshot expiry removed it; the table no longer holds its rows; floe replay --until the position rebuilds them)") {
		t.Errorf("as-of an expired snapshot of one partition:\n%s", out)
	}
	out := lookup("where", "--partition", "0", "--offset", "3")
	if !strings.Contains(out, "(expired: snapshot expiry removed it; the ledger keeps its range, and the current snapshot holds the row, in the file below)\n  file ") {
		t.Errorf("where at an expired snapshot:\n%s", out)
	}
	if out := lookup("where", "--partition", "0", "--offset", "3", "--json"); !strings.Contains(out, `"expired": true`) {
		t.Errorf("where --json at an expired snapshot:\n%s", out)
	}
	// The head's commit is live: one partition's last offset is in it.
	live := 0
	for p, last := range []string{"105", "101", "91"} {
		if out := lookup("where", "--partition", string(rune('0'+p)), "--offset", last); !strings.Contains(out, "expired") {
			live++
		}
	}
	if live != 1 {
		t.Errorf("where at the last offsets: %d answers without an expired snapshot, want 1 (the head's)", live)
	}
}
