package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/pflag"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
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
}

// TestSinkCompactInterval: a live floe sink with --compact-interval
// compacts its table while it commits; stopped, the table holds every
// record once and its audit is complete.
func TestSinkCompactInterval(t *testing.T) {
	st, loc := sinkStack(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var stderr string
	go func() {
		var err error
		_, stderr, err = floeCtx(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders",
			"--flush-records", "1000", "--flush-interval", "500ms", "--compact-interval", "300ms", "--compact-target-file-size", "1MiB"}, loc...)...)
		done <- err
	}()
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
	defer func() {
		if t.Failed() {
			cancel()
			<-done
			t.Log(stderr)
		}
	}()
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
	cancel()
	if err := <-done; err != nil {
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
	stop := def.start(t.Context(), appendTbl)
	stopUpsert := def.start(t.Context(), upsertTbl)
	for _, name := range []string{"lake.orders", "lake.keyed"} {
		waitFor(t, 20*time.Second, "the default's scheduled compaction of "+name, func() bool {
			tbl := openTable(t, st.Catalog(), name)
			return tbl.IsCompaction(tbl.Head().SnapshotID)
		})
	}
	stop()
	stopUpsert()
}
