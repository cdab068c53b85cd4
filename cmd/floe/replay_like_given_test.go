package main

import (
	"strings"
	"testing"
)

// TestReplayLikeGivenModeWins: --like takes the layout flags that were not
// given, "flags given win"; but it takes the key columns of an upsert table
// one by one, so a replay that gives --mode append to copy an upsert
// table's typed layout as an append table was refused for an --id-columns
// the user never gave ("--id-columns n keys an upsert table, not --mode
// append: use --mode upsert"). The key goes with the mode: a --mode or
// --fold given leaves the --like table's --id-columns out.
func TestReplayLikeGivenModeWins(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "profiles"
	produceKeyed(t, st, topic)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.by_n",
		"--mode", "upsert", "--key", "string", "--value", "json", "--id-columns", "n"}, loc...)...)

	code, out, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.by_n_history",
		"--like", "lake.by_n", "--mode", "append"}, loc...)...)
	if code != exitOK || !strings.Contains(out, "layout of lake.by_n_history: --mode append --key string --value json\n") {
		t.Errorf("replay --like an upsert table with --mode append: exit %d, want an append table of its key and value formats\n%s\n%s", code, out, errs)
	}
}
