package main

import (
	"slices"
	"strings"
	"testing"
)

// TestWhereUpsertRangeCountsUpserts (from a new user's run): where on an
// upsert table said a range made "12 rows" where the table held 5 of it:
// its records are upserts, which later ones replace, and deletes. The
// range's counts say so.
func TestWhereUpsertRangeCountsUpserts(t *testing.T) {
	st, loc := replayStack(t)
	produceKeyed(t, st, "wallets")
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", "wallets", "--table", "lake.wallets", "--mode", "upsert", "--key", "string", "--stop-at-end"}, loc)...)
	out := mustFloe(t, slices.Concat([]string{"where", "--table", "lake.wallets", "--partition", "0", "--offset", "0"}, loc)...)
	if !strings.Contains(out, " upserts, ") || !strings.Contains(out, " deletes") || strings.Contains(out, " rows") {
		t.Errorf("where of an upsert table's offset:\n%s\nwant the range's upserts and deletes, not rows", out)
	}
	out = mustFloe(t, slices.Concat([]string{"where", "--table", "lake.wallets", "--partition", "0", "--offset", "0", "--json"}, loc)...)
	if !strings.Contains(out, `"deletes":`) || !strings.Contains(out, `"skipped":`) {
		t.Errorf("where --json of an upsert table's offset lacks deletes and skipped:\n%s", out)
	}
}
