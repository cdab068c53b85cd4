package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestSinkSeveralTopics: repeated --topic and --topic-regex with a {topic}
// table pattern sink each topic into a table of its own (dots made
// underscores); without {topic} every topic goes into one table.
func TestSinkSeveralTopics(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	for _, topic := range []string{"ev.clicks", "ev.views"} {
		if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 2, nil); err != nil {
			t.Fatal(err)
		}
		if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents(topic, 2, 40, time.Now().Add(-time.Hour), 1)); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := floe(t, append([]string{"sink", "-b", brokers, "--topic", "orders", "--topic", "ev.clicks", "--table", "lake.{topic}", "--stop-at-end"}, loc...)...)
	if code != 0 || !strings.Contains(out, "sink lake.orders (new table): 300 rows") || !strings.Contains(out, "sink lake.ev_clicks (new table): 40 rows") {
		t.Fatalf("--topic twice: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	code, out, errs = floe(t, append([]string{"sink", "-b", brokers, "--topic-regex", `ev\..*`, "--table", "lake.{topic}", "--stop-at-end"}, loc...)...)
	if code != 0 || !strings.Contains(out, "sink lake.ev_clicks: 0 rows") || !strings.Contains(out, "sink lake.ev_views (new table): 40 rows") || strings.Contains(out, "orders") {
		t.Fatalf("--topic-regex: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	code, out, errs = floe(t, append([]string{"sink", "-b", brokers, "--topic-regex", `ev\..*`, "--table", "lake.events", "--stop-at-end"}, loc...)...)
	// Both pipelines write lake.events, which the run created (one of
	// them did): both summaries say so.
	if code != 0 || strings.Count(out, "sink lake.events (new table): 40 rows") != 2 {
		t.Fatalf("one table: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	if n := snapshotCount(t, st, "lake.events"); n < 2 {
		t.Fatalf("lake.events has %d snapshots, want the commits of both topics", n)
	}
	code, out, errs = floe(t, append([]string{"sink", "-b", brokers, "--topic-regex", `ev\..*`, "--table", "lake.events_json", "--stop-at-end", "--json"}, loc...)...)
	if code != 0 || strings.Count(out, `"new_table":true`) != 2 {
		t.Fatalf("one table, --json: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
}

// TestSinkTopicRegexMatchesNothing: a bounded run whose --topic-regex
// matches no topic exits 2 naming the pattern and the topics the brokers
// have (it exited 0 and printed nothing); a live sink says in its log that
// it waits for a matching topic to be created.
func TestSinkTopicRegexMatchesNothing(t *testing.T) {
	st, loc := sinkStack(t)
	args := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "--topic-regex", "nomatch.*", "--table", "lake.{topic}"}, loc...)
	code, out, errs := floe(t, append(args, "--stop-at-end")...)
	// The pattern as written, not as anchored (from a new-user run).
	want := `floe: --topic-regex "nomatch.*": want a pattern that matches at least one whole topic name (this one matches none); the brokers have topics orders`
	if code != exitError || !strings.HasSuffix(errs, "\n"+want+"\n") || out != "" {
		t.Errorf("--stop-at-end: exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errs, want)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, errs, err := floeCtx(ctx, args...)
	if err != nil || !strings.Contains(errs, `msg="no topic matches the pattern yet; waiting for one to be created" pattern=nomatch.* check_every=1m0s`) {
		t.Errorf("live sink: %v, log:\n%s", err, errs)
	}
}

// TestSinkSummaryManyPartitions: the closing "next offsets" line lists
// each partition of a few, and summarises many (a 1,000-partition topic
// made a 14 KB line): the partitions as ranges, their count and the lowest
// and highest next offset, pointing at floe status for each.
func TestSinkSummaryManyPartitions(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "wide", 12, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("wide", 12, 240, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	out := mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "wide", "--table", "lake.wide", "--stop-at-end"}, loc...)...)
	if !regexp.MustCompile(`(?m)^next offsets: wide/0-11 \(12 partitions\): \d+ to \d+ \(floe status lists each partition\)$`).MatchString(out) {
		t.Errorf("12 partitions:\n%s", out)
	}
	out = mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	if !regexp.MustCompile(`(?m)^next offsets: orders/0=\d+ orders/1=\d+ orders/2=\d+$`).MatchString(out) {
		t.Errorf("3 partitions:\n%s", out)
	}
}

// TestSinkGroupFlags: --group conflicts with static partitions and bounded
// runs, and --partitions needs a single topic; each mistake exits 2 naming
// it, before anything is created.
func TestSinkGroupFlags(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--topic", "orders", "--group", "g", "--partitions", "0"}, "--group"},
		{[]string{"--topic", "orders", "--group", "g", "--stop-at-end"}, "bounded run"},
		{[]string{"--topic", "orders", "--group", "g", "--group-protocol", "eager"}, "classic or consumer"},
		{[]string{"--topic", "orders", "--topic", "x", "--partitions", "0"}, "--partitions"},
		{[]string{"--topic-regex", "(", "--table", "lake.x"}, "--topic-regex"},
		{[]string{"--topic", "a.b", "--topic", "a_b"}, "both map to table"},
	} {
		args := append([]string{"sink", "-b", brokers, "--table", "lake.{topic}"}, c.args...)
		code, _, errs := floe(t, append(args, loc...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %q", c.args, code, errs, c.want)
		}
	}
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	for tbl, err := range cat.ListTables(t.Context(), []string{"lake"}) {
		if err == nil {
			t.Errorf("table %v created by a run that failed its checks", tbl)
		}
	}
}

// TestSinkTopicRegexNewTopicFromItsStart: with --topic-regex and --start
// latest, a topic created while the sink watches was written entirely
// since the sink started, so it is sunk from offset 0, as partitions added
// while a sink runs are. The watch started it at its last stable offset:
// the 20 records produced before it noticed the topic were never sunk
// (rows only from offset 20) while the audit said complete.
func TestSinkTopicRegexNewTopicFromItsStart(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev.old", 1, nil); err != nil {
		t.Fatal(err)
	}
	old := map[int32]int64{}
	produceRound(t, st.Brokers, "ev.old", 1, 5, old)
	stop := runInBackground(t, append([]string{"sink", "-b", st.Brokers[0], "--topic-regex", `ev\..*`, "--table", "lake.{topic}",
		"--start", "latest", "--topic-check", "2s", "--flush-interval", "100ms"}, loc...)...)
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	// next returns the ledger's next offset of partition 0 of topic in its
	// table, -1 before the table has it.
	next := func(topic string) int64 {
		tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", strings.ReplaceAll(topic, ".", "_")}, snapshot.OpenOptions{})
		if errors.Is(err, snapshot.ErrTableNotFound) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := l.Next()[mapping.TopicPartition{Topic: topic, Partition: 0}]; ok {
			return n
		}
		return -1
	}
	waitFor(t, 20*time.Second, "the sink to start ev.old at its end", func() bool { return next("ev.old") == 5 })
	// The watch lists topics every 2 s: these 20 records are written
	// before it finds the new topic.
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev.new", 1, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, st.Brokers, "ev.new", 1, 20, count)
	waitFor(t, 20*time.Second, "the watch to start ev.new", func() bool { return next("ev.new") >= 0 })
	produceRound(t, st.Brokers, "ev.new", 1, 5, count)
	waitFor(t, 20*time.Second, "the sink to catch up", func() bool { return next("ev.new") == 25 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkTable(t, st.Catalog(), "lake.ev_new", "ev.new", count)
}

// nextOffset is the table's next offset of tp (-1: none, or no table
// yet), from its ledger.
func nextOffset(t *testing.T, st *localstack.Stack, name string, tp mapping.TopicPartition) int64 {
	t.Helper()
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{})
	if errors.Is(err, snapshot.ErrTableNotFound) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	sum, err := tbl.Summary(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ps, ok := sum.Partition(tp); ok {
		return ps.Next()
	}
	return -1
}

// TestSinkTopicRegexTopicGone (from a review): one topic of those a
// --topic-regex sink matches goes away. Deleted under a live sink, it
// stopped the sink of every other topic (exit 2, "check --topic", a flag
// not given); deleted and created again between two bounded runs, every
// later run exited 2 before sinking any other topic. Its pipeline stops
// alone, logged at ERROR, and the others go on; a bounded run exits 2
// naming it once they are done.
func TestSinkTopicRegexTopicGone(t *testing.T) {
	st, loc := sinkStack(t)
	for _, topic := range []string{"ev-keep", "ev-tmp"} {
		if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		produceRound(t, st.Brokers, topic, 1, 10, map[int32]int64{})
	}
	keep := mapping.TopicPartition{Topic: "ev-keep"}
	args := append([]string{"sink", "--brokers", st.Brokers[0], "--topic-regex", "ev-.*", "--table", "lake.{topic}"}, loc...)

	// Live: ev-tmp is deleted; ev-keep goes on.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := liveFloe(ctx, append(args, "--flush-interval", "100ms", "--lag-interval", "1s", "--topic-check", "1s")...)
	waitFor(t, 20*time.Second, "both topics sunk", func() bool {
		return nextOffset(t, st, "lake.ev_keep", keep) == 10 && nextOffset(t, st, "lake.ev_tmp", mapping.TopicPartition{Topic: "ev-tmp"}) == 10
	})
	if err := st.Cluster.DeleteTopic("ev-tmp"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	produceRound(t, st.Brokers, "ev-keep", 1, 10, map[int32]int64{})
	waitFor(t, 20*time.Second, "ev-keep sunk after ev-tmp was deleted", func() bool {
		select {
		case r := <-done:
			t.Fatalf("the live sink ended: %v\n%s", r.err, r.errs)
		default:
		}
		return nextOffset(t, st, "lake.ev_keep", keep) == 20
	})
	// As the log advises: its table dropped, ev-tmp created again is sunk
	// from its start by the live sink (from the diff review).
	mustFloe(t, append([]string{"drop", "--table", "lake.ev_tmp", "--yes"}, loc[:2]...)...)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev-tmp", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "ev-tmp", 1, 5, map[int32]int64{})
	waitFor(t, 20*time.Second, "ev-tmp, created again, sunk into a new table", func() bool {
		return nextOffset(t, st, "lake.ev_tmp", mapping.TopicPartition{Topic: "ev-tmp"}) == 5
	})
	cancel()
	if r := <-done; r.err != nil || !strings.Contains(r.errs, "its pipeline stopped, and the other topics go on") {
		t.Errorf("live sink: %v\n%s", r.err, r.errs)
	}

	// Bounded: ev-tmp is deleted and created again; ev-keep is sunk, and
	// the run exits 2 naming ev-tmp.
	if err := st.Cluster.DeleteTopic("ev-tmp"); err != nil {
		t.Fatal(err)
	}
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "ev-tmp", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "ev-tmp", 1, 5, map[int32]int64{})
	produceRound(t, st.Brokers, "ev-keep", 1, 10, map[int32]int64{})
	code, _, errs := floe(t, append(args, "--stop-at-end")...)
	if code != exitError || !strings.Contains(errs, "topic ev-tmp has ID") || nextOffset(t, st, "lake.ev_keep", keep) != 30 {
		t.Errorf("bounded run: exit %d, ev-keep next %d, want 30\n%s", code, nextOffset(t, st, "lake.ev_keep", keep), errs)
	}
}

// TestLiveSinkUnknownTopicNamesThePattern (from a new-user run): a live
// sink started before its topic exists (a deployment that starts the sink
// first) is refused; the error says how to wait for the topic instead.
func TestLiveSinkUnknownTopicNamesThePattern(t *testing.T) {
	st, loc := sinkStack(t)
	code, _, errs := floe(t, append([]string{"sink", "-b", st.Brokers[0], "-t", "orders.v2", "--table", "lake.v2"}, loc...)...)
	if want := `--topic-regex 'orders\.v2'`; code != exitError || !strings.Contains(errs, want) {
		t.Fatalf("live sink of a topic that does not exist yet: exit %d, %q; want exit 2 naming %s", code, errs, want)
	}
}

// TestLiveSinkTopicDeletedSaysSo (from a new-user run): the topic of a
// running --topic sink is deleted. The sink stops (exit 2) as before, but
// said only what a misspelt --topic gets ("does not exist ...; check
// --topic"), for a topic it had been sinking: it now says the topic was
// deleted while it ran, what the table keeps and what to do with a topic
// created again under that name.
func TestLiveSinkTopicDeletedSaysSo(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "gone", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "gone", 1, 10, map[int32]int64{})
	type ended struct {
		code int
		errs string
	}
	done := make(chan ended, 1)
	go func() {
		code, _, errs := floe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "gone", "--table", "lake.gone",
			"--flush-interval", "100ms", "--lag-interval", "1s"}, loc...)...)
		done <- ended{code, errs}
	}()
	waitFor(t, 20*time.Second, "the topic sunk", func() bool {
		return nextOffset(t, st, "lake.gone", mapping.TopicPartition{Topic: "gone"}) == 10
	})
	if err := st.Cluster.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if want := `floe: topic "gone" was deleted while the sink ran`; r.code != exitError || !strings.Contains(r.errs, want) ||
			!strings.Contains(r.errs, "sink it into a new table") || strings.Contains(r.errs, "check --topic") {
			t.Errorf("live sink whose topic was deleted: exit %d\n%s\nwant exit 2 saying %q, and no check --topic", r.code, r.errs, want)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the live sink did not stop within 90 s of its topic's deletion")
	}
}

// TestSinkWarnsOfANewTopicInATable (from a new-user run): a wrong --topic
// into an existing table sank that topic beside the table's own without a
// word. A table may hold several topics, so the sink goes on, but it
// warns, naming the topics the table held; a run of the table's own topic,
// a new table and a --topic-regex run do not warn. The run's summary says
// it again, as a warning: line and in --json's warnings, as it does the
// other warnings of a run (it was only in the log: from a new user's run).
func TestSinkWarnsOfANewTopicInATable(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "payments", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "payments", 1, 5, map[int32]int64{})
	var out string
	sink := func(args ...string) string {
		t.Helper()
		code, stdout, errs := floe(t, append(append([]string{"sink", "--brokers", st.Brokers[0], "--stop-at-end"}, args...), loc...)...)
		if code != exitOK {
			t.Fatalf("floe sink %v: exit %d\n%s", args, code, errs)
		}
		out = stdout
		return errs
	}
	const warning = "this run adds a topic to a table that holds other topics"
	const summary = "this run added topic payments to table lake.%s, which held orders: a table may hold several, but if --topic (or --table) was a mistake, docs/deployment.md, recovering from mistakes, says how to take the topic out again"
	if errs := sink("--topic", "orders", "--table", "lake.orders"); strings.Contains(errs, warning) || strings.Contains(out, "warning:") {
		t.Errorf("a new table warned:\n%s\n%s", out, errs)
	}
	if errs := sink("--topic", "orders", "--table", "lake.orders"); strings.Contains(errs, warning) {
		t.Errorf("the table's own topic warned:\n%s", errs)
	}
	errs := sink("--topic", "payments", "--table", "lake.orders")
	if !strings.Contains(errs, warning) || !strings.Contains(errs, "topic=payments") || !strings.Contains(errs, "table_topics=orders") {
		t.Errorf("another topic into lake.orders: want the warning naming payments and the table's orders:\n%s", errs)
	}
	if !strings.Contains(out, "\nwarning: "+fmt.Sprintf(summary, "orders")+"\n") {
		t.Errorf("another topic into lake.orders: want the summary's warning\n%s", out)
	}
	sink("--topic", "orders", "--table", "lake.j")
	sink("--topic", "payments", "--table", "lake.j", "--json")
	var r runReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || !slices.Contains(r.Warnings, fmt.Sprintf(summary, "j")) {
		t.Errorf("--json: want the warning in warnings (%v)\n%s", err, out)
	}
	// Named beside one of the table's own topics, a new topic is meant.
	sink("--topic", "orders", "--table", "lake.meant")
	if errs := sink("--topic", "orders", "--topic", "payments", "--table", "lake.meant"); strings.Contains(errs, warning) {
		t.Errorf("a run naming the table's topic too warned:\n%s", errs)
	}
	sink("--topic", "orders", "--table", "lake.both")
	if errs := sink("--topic-regex", "pay.*", "--table", "lake.both"); strings.Contains(errs, warning) {
		t.Errorf("a --topic-regex run that adds its topic to a table warned:\n%s", errs)
	}
}
