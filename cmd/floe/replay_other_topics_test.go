package main

import (
	"slices"
	"strings"
	"testing"
)

// TestReplayPublishRefusesTableOfSeveralTopics (from a new user's run): an
// upsert table sunk from two topics. A replay of one onto a branch with
// --publish read the whole log, then was refused for keys that differ (the
// other topic's), with a hint that blamed keys in several partitions and
// offered --publish-different, which drops the other topic's rows. It is
// refused before reading anything, naming the other topic.
func TestReplayPublishRefusesTableOfSeveralTopics(t *testing.T) {
	st, loc := replayStack(t)
	produceKeyed(t, st, "accounts")
	produceKeyed(t, st, "accounts_b")
	brokers := strings.Join(st.Brokers, ",")
	for _, topic := range []string{"accounts", "accounts_b"} {
		mustFloe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.accounts", "--mode", "upsert", "--key", "string", "--stop-at-end"}, loc)...)
	}
	code, out, errs := floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", "accounts", "--table", "lake.accounts", "--branch", "rb", "--publish"}, loc)...)
	if code != exitError || !strings.Contains(errs, "main of lake.accounts holds topic accounts_b beside accounts, which a replay of accounts does not rebuild") ||
		!strings.Contains(errs, "a replay rebuilds one topic") || strings.Contains(errs, "several partitions") || strings.Contains(out, "replayed") {
		t.Errorf("replay --publish of one topic of a two-topic table: exit %d\n%s%s\nwant exit 2 before replaying, naming accounts_b", code, out, errs)
	}
}
