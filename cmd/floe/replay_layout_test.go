package main

import (
	"strings"
	"testing"
)

// TestReplaySummaryNamesLayout: a replay into a new table without --mode,
// --key and --value makes a raw append table, and said nothing of it: a
// new user replaying an upsert JSON table's topic got an append table
// unawares. The summary names the layout as the flags that make it, and
// says when they are the defaults.
func TestReplaySummaryNamesLayout(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "profiles"
	produceKeyed(t, st, topic)
	brokers := strings.Join(st.Brokers, ",")
	out := mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.profiles_copy"}, loc...)...)
	if !strings.Contains(out, "layout of lake.profiles_copy: --mode append --key raw --value raw (the defaults, as no --mode, --key or --value was given") {
		t.Errorf("a replay with no layout flags does not name the raw append layout it made:\n%s", out)
	}
	out = mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.profiles_upsert", "--mode", "upsert", "--key", "string", "--value", "json"}, loc...)...)
	if !strings.Contains(out, "layout of lake.profiles_upsert: --mode upsert --key string --value json\n") {
		t.Errorf("a replay with --mode upsert --key string --value json does not name its layout:\n%s", out)
	}
}
