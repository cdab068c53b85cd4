package main

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// demoFold is the fold of sinkStack's events: the latest value of each
// key, none for a key whose latest record is a tombstone.
func demoFold() map[string]string {
	want := map[string]string{}
	for _, r := range localstack.DemoEvents("orders", 3, 300, time.Now(), 1) { // sinkStack's events
		if r.Value == nil {
			delete(want, string(r.Key))
		} else {
			want[string(r.Key)] = string(r.Value)
		}
	}
	return want
}

// TestMaintainCompactUpsert: floe maintain --compact on an upsert table
// (floe sink --mode upsert in 40-record flushes, an equality-delete file
// each) rewrites it with the deletes applied: it says how many rows are
// live and how many delete files it dropped, the table then has no delete
// file, reads exactly as before (the fold of the topic) and its ledger is
// untouched; a dry run first says what it would drop. On format version
// 2 and 3 tables, and on a table partitioned by a bucket of the key (each
// partition's deletes dropped with its rewrite).
func TestMaintainCompactUpsert(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"v2", []string{"--format-version", "2"}},
		{"v3", []string{"--format-version", "3"}},
		{"bucketed", []string{"--partition-by", "bucket(4, kafka_key)"}},
	} {
		t.Run(c.name, func(t *testing.T) { maintainCompactUpsert(t, c.args) })
	}
}

func maintainCompactUpsert(t *testing.T, args []string) {
	st, loc := sinkStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.customers", "--stop-at-end",
		"--flush-records", "40", "--mode", "upsert", "--key", "string"}, args, loc)...)
	want := demoFold()
	if got := stateOf(t, st, "lake.customers", "", ""); !maps.Equal(got, want) {
		t.Fatalf("before compaction: %d keys, the fold has %d", len(got), len(want))
	}
	tbl := openTable(t, st.Catalog(), "lake.customers")
	if args[0] == "--format-version" && strconv.Itoa(tbl.Iceberg().Metadata().Version()) != args[1] {
		t.Fatalf("format version %d, want %s", tbl.Iceberg().Metadata().Version(), args[1])
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	commits := len(l.Commits)
	deletes := tbl.Head().Summary.Properties["total-delete-files"]

	maintain := append([]string{"maintain", "--table", "lake.customers", "--compact"}, loc...)
	if out := mustFloe(t, append(maintain, "--dry-run")...); !strings.Contains(out, "applying their deletes and dropping "+deletes+" delete files") {
		t.Fatalf("floe maintain --compact --dry-run (%s delete files):\n%s", deletes, out)
	}
	out := mustFloe(t, maintain...)
	// No expiry or orphan removal was asked for: nothing is said of them
	// (a line "0 snapshots expired" on the dead-letter table confused a
	// new user).
	// The rows read and the rows live are told apart: "N rows; deletes
	// applied: M rows live" read as if the new files held N (a new
	// user's report).
	applied := regexp.MustCompile(`\), \d+ rows read, ` + strconv.Itoa(len(want)) + ` live after the deletes \(` + deletes + ` delete files dropped\); data files `)
	if !strings.Contains(out, "compaction of lake.customers: snapshot ") || !applied.MatchString(out) ||
		strings.Contains(out, "expired") {
		t.Fatalf("floe maintain --compact (%d live rows, %s delete files):\n%s", len(want), deletes, out)
	}
	if got := stateOf(t, st, "lake.customers", "", ""); !maps.Equal(got, want) {
		t.Fatalf("after compaction: %d keys, the fold has %d", len(got), len(want))
	}
	tbl = openTable(t, st.Catalog(), "lake.customers")
	if l, err = tbl.Ledger(); err != nil {
		t.Fatal(err)
	}
	head := tbl.Head()
	if !tbl.IsCompaction(head.SnapshotID) || head.Summary.Properties["total-delete-files"] != "0" || len(l.Commits) != commits {
		t.Fatalf("after compaction: head %d (compaction %v) summary %v, %d ledger commits (before %d)",
			head.SnapshotID, tbl.IsCompaction(head.SnapshotID), head.Summary.Properties, len(l.Commits), commits)
	}
}

// TestSinkCompactIntervalUpsert: a live floe sink --mode upsert with
// --compact-interval compacts its table while it commits, the deletes
// applied; stopped once it has caught up, the table is the fold of the
// topic and its ledger covers every offset.
func TestSinkCompactIntervalUpsert(t *testing.T) {
	st, loc := sinkStack(t)
	stop := sinkInBackground(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.customers",
		"--mode", "upsert", "--key", "string", "--flush-records", "50", "--flush-interval", "300ms", "--compact-interval", "500ms"}, loc...)...)
	want := demoFold()
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a scheduled compaction that applied deletes, and the sink caught up", func() bool {
		tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "customers"}, snapshot.OpenOptions{})
		if errors.Is(err, snapshot.ErrTableNotFound) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		compacted := false
		for _, s := range tbl.Iceberg().Metadata().Snapshots() {
			if tbl.IsCompaction(s.SnapshotID) && s.Summary.Properties[snapshot.KeyCompactDroppedDeletes] != "0" {
				compacted = true
			}
		}
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		var next int64
		for _, n := range l.Next() {
			next += n
		}
		return compacted && next == 300
	})
	if _, err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := stateOf(t, st, "lake.customers", "", ""); !maps.Equal(got, want) {
		t.Fatalf("%d keys, the fold has %d", len(got), len(want))
	}
}
