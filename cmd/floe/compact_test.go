package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestMaintainCompact: floe maintain --compact (dry run, then for real,
// then as JSON) merges a table of 3 partitions sunk in small flushes into
// one file, and floe audit of every level, content included, is complete
// afterwards.
func TestMaintainCompact(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "40"}, loc...)...)
	maintain := append([]string{"maintain", "--table", "lake.orders", "--compact", "--target-file-size", "1MiB"}, loc...)

	out := mustFloe(t, append(maintain, "--dry-run")...)
	if !strings.Contains(out, "compaction of lake.orders would merge") {
		t.Fatalf("dry run:\n%s", out)
	}
	out = mustFloe(t, maintain...)
	// One file of the 3 partitions (a file group).
	if !strings.Contains(out, "compaction of lake.orders: snapshot ") || !strings.Contains(out, " -> 1\n") {
		t.Fatalf("compaction:\n%s", out)
	}
	tbl := auditTable(t, st, "lake.orders")
	if !tbl.IsCompaction(tbl.Head().SnapshotID) {
		t.Fatal("the head is not a compaction")
	}
	out = mustFloe(t, append([]string{"audit", "--table", "lake.orders", "--deep", "--brokers", st.Brokers[0], "--verify-content"}, loc...)...)
	if !strings.Contains(out, "verdict: COMPLETE") {
		t.Fatalf("audit:\n%s", out)
	}

	var rep maintainReport
	if err := json.Unmarshal([]byte(mustFloe(t, append(maintain, "--json")...)), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Compaction) != 1 || rep.Compaction[0].Groups != 0 || rep.Compaction[0].FilesBefore != 1 {
		t.Fatalf("second compaction: %+v", rep.Compaction)
	}
	// It says so in words, and its duration with its unit (from a
	// new-user run: "attempts": 0, "groups": 0 and "duration_ns" alone).
	if c := rep.Compaction[0]; c.Summary != "compaction of lake.orders: nothing to merge (1 data file)" {
		t.Errorf("second compaction's summary %q", c.Summary)
	}
	if d, err := time.ParseDuration(rep.Compaction[0].Took); err != nil || d != rep.Compaction[0].Duration.Round(time.Millisecond) {
		t.Errorf("second compaction took %q (%v), duration_ns %d", rep.Compaction[0].Took, err, rep.Compaction[0].Duration)
	}
}

// sinkInBackground runs floe with args (a sink) until the returned stop
// is called, which returns its stderr and error. Should the test fail
// before, its cleanup stops the sink and logs what it wrote.
func sinkInBackground(t *testing.T, args ...string) (stop func() (string, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var stderr string
	go func() {
		var err error
		_, stderr, err = floeCtx(ctx, args...)
		done <- err
	}()
	var (
		once sync.Once
		err  error
	)
	stop = func() (string, error) {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return stderr, err
	}
	t.Cleanup(func() {
		if out, _ := stop(); t.Failed() {
			t.Log(out)
		}
	})
	return stop
}

// TestSinkCompactInterval: a live floe sink with --compact-interval
// compacts its table while it commits; stopped, the table holds every
// record once and its audit is complete.
func TestSinkCompactInterval(t *testing.T) {
	st, loc := sinkStack(t)
	stop := sinkInBackground(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders",
		"--flush-records", "1000", "--flush-interval", "500ms", "--compact-interval", "300ms", "--compact-target-file-size", "1MiB"}, loc...)...)
	count := map[int32]int64{}
	for _, r := range localstack.DemoEvents("orders", 3, 300, time.Now(), 1) { // sinkStack's events
		count[r.Partition]++
	}
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	compacted := func() bool {
		tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "orders"}, snapshot.OpenOptions{})
		if errors.Is(err, snapshot.ErrTableNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tbl.Iceberg().Metadata().Snapshots() {
			if tbl.IsCompaction(s.SnapshotID) {
				return true
			}
		}
		return false
	}
	waitFor(t, 20*time.Second, "a scheduled compaction", func() bool {
		produceRound(t, st.Brokers, "orders", 3, 30, count)
		return compacted()
	})
	waitFor(t, 20*time.Second, "the sink to catch up", func() bool {
		l, err := openTable(t, st.Catalog(), "lake.orders").Ledger()
		if err != nil {
			t.Fatal(err)
		}
		for tp, n := range l.Next() {
			if n != count[tp.Partition] {
				return false
			}
		}
		return len(l.Next()) == 3
	})
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	checkTable(t, st.Catalog(), "lake.orders", "orders", count)
	out := mustFloe(t, append([]string{"audit", "--table", "lake.orders", "--deep", "--brokers", st.Brokers[0], "--verify-content"}, loc...)...)
	if !strings.Contains(out, "verdict: COMPLETE") {
		t.Fatalf("audit:\n%s", out)
	}
}

// TestSinkCompactIntervalDefault: floe sink compacts by default (every
// hour, said in --help), append and upsert tables alike; 0 turns it off.
// The effect of the default is shown at a shorter interval: the flag left
// unset, both tables get compacted, the upsert table's deletes applied.
func TestSinkCompactIntervalDefault(t *testing.T) {
	code, help, _ := floe(t, "sink", "--help")
	if code != 0 || !strings.Contains(help, "--compact-interval duration") || !strings.Contains(help, "0 turns it off") ||
		!strings.Contains(help, "applies the row-level deletes") || !strings.Contains(help, "(default 1h0m0s)") {
		t.Fatalf("floe sink --help does not give --compact-interval's default of 1h:\n%s", help)
	}

	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "40"}, loc...)...)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.keyed", "--stop-at-end", "--mode", "upsert", "--key", "string", "--flush-records", "40"}, loc...)...)
	appendTbl, upsertTbl := openTable(t, st.Catalog(), "lake.orders"), openTable(t, st.Catalog(), "lake.keyed")

	parse := func(args ...string) *sinkCompaction {
		var c sinkCompaction
		fs := pflag.NewFlagSet("sink", pflag.ContinueOnError)
		c.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	def := parse()
	if got := def.every(); got != time.Hour {
		t.Errorf("default: compacted every %s, want 1h", got)
	}
	if got := parse("--compact-interval", "0").every(); got != 0 {
		t.Errorf("--compact-interval 0: compacted every %s, want never", got)
	}

	def.interval = 100 * time.Millisecond // the default, at a test's pace
	stop := def.start(t.Context(), appendTbl, nil)
	stopUpsert := def.start(t.Context(), upsertTbl, nil)
	for _, name := range []string{"lake.orders", "lake.keyed"} {
		waitFor(t, 20*time.Second, "the default's scheduled compaction of "+name, func() bool {
			tbl := openTable(t, st.Catalog(), name)
			return tbl.IsCompaction(tbl.Head().SnapshotID)
		})
	}
	stop()
	stopUpsert()
}

// TestSinkCompactionWinsFastSink: a live floe sink committing as fast as
// it can (20 records a flush over 60 partitions, a backlog kept ahead of
// it) compacts its table every second, and every compaction commits at
// its first or second attempt: the sink holds its commits while its
// compaction's commit runs, so it never makes its own compaction start
// over (on main, which raced the sink, compactions took many attempts
// and gave up after 30). The live data files, counted from the
// manifests, stay bounded, and the table is complete after.
func TestSinkCompactionWinsFastSink(t *testing.T) {
	const partitions = 60
	st, _, _ := partitionedStack(t, "fast", partitions)
	count := map[int32]int64{}
	produceRound(t, st.Brokers, "fast", partitions, 2400, count)
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var stderr string
	go func() {
		var err error
		_, stderr, err = floeCtx(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "fast", "--table", "lake.fast",
			"--flush-records", "20", "--compact-interval", "1s"}, loc...)...)
		done <- err
	}()
	stopped := false
	defer func() {
		if t.Failed() {
			if !stopped {
				cancel()
				<-done
			}
			t.Log(stderr)
		}
	}()
	cat, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	compactions := map[int64]bool{}
	maxLive := 0
	waitFor(t, 120*time.Second, "five scheduled compactions", func() bool {
		tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "fast"}, snapshot.OpenOptions{})
		if errors.Is(err, snapshot.ErrTableNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range tbl.Iceberg().Metadata().Snapshots() {
			if tbl.IsCompaction(s.SnapshotID) {
				compactions[s.SnapshotID] = true
			}
		}
		files, err := tbl.Files(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		maxLive = max(maxLive, len(files))
		if l, err := tbl.Summary(t.Context(), 0); err == nil && l.Next()[mapping.TopicPartition{Topic: "fast", Partition: 0}] > count[0]-10 {
			produceRound(t, st.Brokers, "fast", partitions, 1200, count) // keep a backlog: the sink never waits
		}
		return len(compactions) >= 5
	})
	waitFor(t, 180*time.Second, "the sink to catch up", func() bool {
		l, err := openTable(t, cfg, "lake.fast").Summary(t.Context(), 0)
		if err != nil {
			t.Fatal(err)
		}
		for p, n := range count {
			if l.Next()[mapping.TopicPartition{Topic: "fast", Partition: p}] != n {
				return false
			}
		}
		return true
	})
	cancel()
	stopped = true
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	attempts := regexp.MustCompile(`msg=compacted scheduled=true .* attempts=(\d+)`)
	var seen []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "scheduled compaction failed") {
			t.Errorf("a compaction failed: %s", line)
		}
		if m := attempts.FindStringSubmatch(line); m != nil {
			seen = append(seen, m[1])
			if n, _ := strconv.Atoi(m[1]); n > 2 {
				t.Errorf("a compaction took %d commit attempts, want 1 or 2: %s", n, line)
			}
		}
	}
	t.Logf("compactions' attempts %v, most live data files seen %d", seen, maxLive)
	if len(seen) < 5 {
		t.Errorf("%d compactions logged, want at least 5", len(seen))
	}
	if maxLive > 5*partitions {
		t.Errorf("live data files reached %d, want them bounded by the compactions (at most %d)", maxLive, 5*partitions)
	}
	checkTable(t, cfg, "lake.fast", "fast", count)
	out := mustFloe(t, append([]string{"audit", "--table", "lake.fast", "--brokers", st.Brokers[0]}, loc...)...)
	if !strings.Contains(out, "verdict: COMPLETE") {
		t.Fatalf("audit:\n%s", out)
	}
}

// TestTwoTopicsOneTableCompactOnce: floe sink with two --topic and one
// --table (no {topic}) runs a pipeline per topic. Each started a scheduled
// compaction of the table with a turn of its own: at every tick both
// planned on the same files, one committed, and the other threw its
// rewrite away and logged "scheduled compaction failed" (8 in 8 s; found
// by review). The pipelines of a table now share one turn and one
// compaction, which never loses to them.
func TestTwoTopicsOneTableCompactOnce(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "payments", 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("payments", 3, 300, time.Now().Add(-time.Hour), 2)); err != nil {
		t.Fatal(err)
	}
	stop := sinkInBackground(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--topic", "payments", "--table", "lake.both",
		"--flush-records", "1000", "--flush-interval", "200ms", "--compact-interval", "1s", "--compact-target-file-size", "1MiB"}, loc...)...)
	orders, payments := map[int32]int64{}, map[int32]int64{}
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); {
		produceRound(t, st.Brokers, "orders", 3, 30, orders)
		produceRound(t, st.Brokers, "payments", 3, 30, payments)
		time.Sleep(150 * time.Millisecond)
	}
	stderr, err := stop()
	if err != nil {
		t.Fatalf("sink: %v\n%s", err, stderr)
	}
	var failed []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "scheduled compaction failed") {
			failed = append(failed, line)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d scheduled compactions of lake.both by this one floe sink gave up against its own other pipeline's compaction, e.g.:\n%s",
			len(failed), failed[0])
	}
}
