package main

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/snapshot"
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

// TestReplayLike: a replay into a new table took the raw append layout
// unless every layout flag was given again (a new user rebuilt a typed
// table into a raw one). --like TABLE takes that table's mode, key and
// value formats and partition spec; a flag given wins; with --branch,
// which takes its table's own layout, it is refused.
func TestReplayLike(t *testing.T) {
	st, loc := replayStack(t)
	const topic = "profiles"
	produceKeyed(t, st, topic)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.profiles", "--mode", "upsert", "--key", "string", "--value", "json",
		"--partition-by", "bucket(4, kafka_key)"}, loc...)...)

	out := mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.profiles_copy", "--like", "lake.profiles"}, loc...)...)
	for _, want := range []string{
		"layout of lake.profiles taken: --mode upsert --key string --value json --partition-by bucket(4, kafka_key)\n",
		"layout of lake.profiles_copy: --mode upsert --key string --value json\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay --like lake.profiles does not say %q:\n%s", want, out)
		}
	}
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	cp, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "profiles_copy"}, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pb, err := cp.PartitionBy(); err != nil || pb == nil || pb.String() != "bucket(4, kafka_key)" {
		t.Errorf("the copy's partition spec is %v (%v), want lake.profiles's bucket(4, kafka_key)", pb, err)
	}

	out = mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.profiles_raw", "--like", "lake.profiles", "--value", "raw"}, loc...)...)
	if !strings.Contains(out, "layout of lake.profiles_raw: --mode upsert --key string --value raw\n") {
		t.Errorf("--value raw with --like did not win:\n%s", out)
	}

	// The format version is taken too (a v3 table's copy was a v2 table).
	mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.profiles_v3", "--like", "lake.profiles", "--format-version", "3"}, loc...)...)
	out = mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.profiles_v3_copy", "--like", "lake.profiles_v3"}, loc...)...)
	if !strings.Contains(out, " --format-version 3\n") {
		t.Errorf("replay --like a v3 table does not take its format version:\n%s", out)
	}
	v3, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "profiles_v3_copy"}, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := v3.Iceberg().Metadata().Version(); v != 3 {
		t.Errorf("the copy of a v3 table is format version %d", v)
	}

	code, _, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.profiles", "--branch", "b", "--like", "lake.profiles_copy"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "a replay onto --branch takes its table's own: drop --like") {
		t.Errorf("--like with --branch: exit %d, %s", code, errs)
	}
	code, _, errs = floe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.new", "--like", "lake.nope"}, loc...)...)
	if code != exitError || !strings.Contains(errs, "--like lake.nope") {
		t.Errorf("--like of a missing table: exit %d, %s", code, errs)
	}
}
