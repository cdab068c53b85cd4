package replay_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// heldOffsets returns the offsets of tbl's rows, sorted.
func heldOffsetsOf(t *testing.T, tbl *snapshot.Table) []int64 {
	t.Helper()
	var out []int64
	for _, r := range rows(t, tbl) {
		out = append(out, r.Offset)
	}
	slices.Sort(out)
	return out
}

// TestAbortedRecordsHideCompactedRowsPastBranchEnd (from a review of
// bfd1ede): main, an append table of a compacted topic, holds the rows of
// offsets 0-4; compaction then removes offset 1 (its key k was written
// again at 3). A transactional producer then aborts a record (offset 5,
// its marker 6), a plain record follows (7), and main's sink reads them
// (rows 7; 5 and 6 hold no row). A replay onto a branch ending at 1
// (--until) publishes: main goes back to offset 1 and a sink on main reads
// [1, 8) again, which no longer holds offset 1: its row is gone for good.
// mainAheadCompacted is meant to refuse exactly this, but it compares
// counts: main holds 5 rows over [1, 8) (1, 2, 3, 4, 7) and ReadLog, which
// reads read_uncommitted, counts 5 non-control records there (2, 3, 4, the
// aborted 5, and 7): the aborted record, which no sink makes a row of,
// stands in for the compacted one. Without the aborted transaction the
// publish is refused (TestPublishMovingMainBackOverCompactedRecords).
func TestAbortedRecordsHideCompactedRowsPastBranchEnd(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpaborted"
	e.compactedTopic(topic)
	base := time.Now().Add(-time.Hour)
	rec := func(i int, k string) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: []byte(k), Value: fmt.Appendf(nil, "%s-%d", k, i), Timestamp: base.Add(time.Duration(i) * time.Second)}
	}
	for i, k := range []string{"a", "k", "b", "k", "c"} {
		e.Produce([]*kgo.Record{rec(i, k)})
	}
	main := e.Table("lake.cmpaborted")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	e.Stack.Cluster.Compact() // removes k@1 (k@3 is its latest)
	e.Txn("review-s53-aborted", []*kgo.Record{rec(5, "x")}, false)
	e.Produce([]*kgo.Record{rec(7, "d")})
	if _, err := e.sink(e.openExisting("lake.cmpaborted", ""), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	before := heldOffsetsOf(t, e.openExisting("lake.cmpaborted", ""))
	if !slices.Equal(before, []int64{0, 1, 2, 3, 4, 7}) {
		t.Fatalf("main holds the rows of offsets %v, want [0 1 2 3 4 7]", before)
	}
	until, err := replay.ParseBound("0=1", topic, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.cmpaborted", replay.Options{Topic: topic, Until: until, Branch: "rebuild", Publish: true})
	if _, ok := errors.AsType[*replay.DifferError](err); ok && !res.Published {
		return // refused: main's row of offset 1 is kept
	}
	if _, serr := e.sink(e.openExisting("lake.cmpaborted", ""), connector.Config{Topic: topic, StopAtEnd: true}); serr != nil {
		t.Fatal(serr)
	}
	after := heldOffsetsOf(t, e.openExisting("lake.cmpaborted", ""))
	t.Fatalf("publish moving main back over a compacted record, with an aborted record in the offsets read again: err %v, published %v; main held the rows of offsets %v, after the next sink session %v: the row of offset 1 is gone for good (compaction removed its record); want the publish refused: the aborted record ReadLog counts (read_uncommitted) is no row of main's and does not stand for the compacted one",
		err, res.Published, before, after)
}

// TestDeadLettersHideCompactedRowsPastBranchEnd (from a review of
// bfd1ede): main, a JSON table of a compacted topic, reads offsets [0, 6)
// in one commit: rows 0, 1, 4, 5 and dead letters 2 and 3 (values that are
// not JSON). Compaction removes offset 1 (its key k was written again at
// 4). A replay onto a branch ending at 1 (--until) publishes: main goes
// back to 1, and a sink on main reads [1, 6) again, which no longer holds
// offset 1: its row is gone for good. mainAheadCompacted bounds main's dead
// letters over [1, 6) from its one range [0, 6) as 2 - 1 = 1 (the range's
// dead letters less its offsets outside), so main "holds 3 rows and at
// least 1 dead letter", 4, against the log's 4 records (2, 3, 4, 5): the
// dead letter the bound leaves out stands in for the compacted row.
func TestDeadLettersHideCompactedRowsPastBranchEnd(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpdeadahead"
	e.compactedTopic(topic)
	tbl, dlq := e.TypedTable("lake.cmpdeadahead", mapping.Layout{Value: mapping.ValueJSON})
	for _, r := range [][2]string{{"a", `{"id":0}`}, {"k", `{"id":1}`}, {"x", `oops`}, {"y", `oops`}, {"k", `{"id":4}`}, {"c", `{"id":5}`}} {
		e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(r[0]), Value: []byte(r[1])}})
	}
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	before := heldOffsetsOf(t, e.openExisting("lake.cmpdeadahead", ""))
	if !slices.Equal(before, []int64{0, 1, 4, 5}) {
		t.Fatalf("main holds the rows of offsets %v, want [0 1 4 5]", before)
	}
	e.Stack.Cluster.Compact() // removes k@1
	until, err := replay.ParseBound("0=1", topic, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.cmpdeadahead", replay.Options{Topic: topic, Until: until, Branch: "rebuild", Publish: true})
	if _, ok := errors.AsType[*replay.DifferError](err); ok && !res.Published {
		return
	}
	tbl, dlq = e.TypedTable("lake.cmpdeadahead", mapping.Layout{Value: mapping.ValueJSON})
	if _, serr := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); serr != nil {
		t.Fatal(serr)
	}
	after := heldOffsetsOf(t, e.openExisting("lake.cmpdeadahead", ""))
	t.Fatalf("publish moving main back over a compacted record, main holding dead letters past the branch's end in a range that straddles it: err %v, published %v; main held the rows of offsets %v, after the next sink session %v: the row of offset 1 is gone for good; want the publish refused (main's rows there are checked against the log by count, and its dead letters' lower bound drops the one the straddle cuts)",
		err, res.Published, before, after)
}

// TestPublishRepairsDuplicatedRows (from a review): main, an
// append table of a topic that is not compacted, holds the 10 rows of
// offsets [0, 10), and another writer added a copy of its data file (a
// backup restored, an add_files run twice): the audit's rows level finds
// every offset duplicated, and the ledger, which has no overlap, is intact.
// A replay onto a branch rebuilds the 10 rows from the log, which still
// holds all of them, and --publish is the repair (mainRowsFewer's own
// comment: "a table holding duplicates is what a replay rebuilds"; before
// bfd1ede the counts came from the ledgers and the publish went ahead).
// mainRowsFewer now counts main's rows as the table holds them, 20 against
// the branch's 10, and refuses, saying the topic's compaction removed
// records or the branch made dead letters: neither is so, and publishing
// drops no record.
func TestPublishRepairsDuplicatedRows(t *testing.T) {
	e := newEnv(t)
	const topic = "dupfile"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "v"))
	main := e.Table("lake.dupfile")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	main = e.openExisting("lake.dupfile", "")
	files, err := main.Files(e.Ctx, main.Head().SnapshotID)
	if err != nil || len(files) != 1 {
		t.Fatalf("main's data files %v: %v", files, err)
	}
	src := strings.TrimPrefix(files[0].Path, "file://")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(filepath.Dir(src), "restored-copy.parquet")
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	txn := main.Iceberg().NewTransaction()
	if err := txn.AddFiles(e.Ctx, []string{"file://" + dst}, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(rows(t, e.openExisting("lake.dupfile", ""))); n != 20 {
		t.Fatalf("main holds %d rows after the copy, want 20", n)
	}
	res, err := e.replay("lake.dupfile", replay.Options{Topic: topic, Branch: "rebuild", Publish: true})
	if err != nil || !res.Published {
		t.Fatalf("publish of a rebuild of a table whose rows another writer duplicated (the ledger intact, the log holding every record): err %v, published %v; want it published: the branch holds every record main's ledger accounts for, and publishing drops only the duplicates",
			err, res.Published)
	}
	if n := len(rows(t, e.openExisting("lake.dupfile", ""))); n != 10 {
		t.Errorf("main holds %d rows after the publish, want 10", n)
	}
}

// reviewS53ForeignDelete commits, as another engine would (Spark's DELETE
// in merge-on-read mode), an equality delete of the row of partition p at
// TestForeignDeleteHidesCompactedRow (from a review): main, an
// append table of a compacted topic, holds the rows of offsets [0, 6);
// another engine deletes the row of offset 4 (a reviewed DELETE, say), and
// compaction removes offset 1 (its key k was written again at 3). A replay
// onto a branch over the whole log, [0, 6), holds 0, 2, 3, 4, 5 and
// publishes: the row of offset 1, which main holds and no log holds any
// more, is gone for good (and the row another engine deleted is back).
// mainRowsFewer compares counts over the shared offsets: main's 5 rows (4
// deleted) against the branch's 5: the deleted row stands in for the
// compacted one. Without the foreign delete the publish is refused
// (TestPublishRefusesRowsCompactedAway).
func TestForeignDeleteHidesCompactedRow(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpforeigndel"
	e.compactedTopic(topic)
	for i, k := range []string{"a", "k", "b", "k", "c", "d"} {
		e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(k), Value: fmt.Appendf(nil, "%s-%d", k, i)}})
	}
	main := e.Table("lake.cmpforeigndel")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	floetest.ForeignEqualityDelete(t, e.openExisting("lake.cmpforeigndel", "").Iceberg(), 0, 4)
	before := heldOffsetsOf(t, e.openExisting("lake.cmpforeigndel", ""))
	if !slices.Equal(before, []int64{0, 1, 2, 3, 5}) {
		t.Fatalf("main holds the rows of offsets %v, want [0 1 2 3 5]", before)
	}
	e.Stack.Cluster.Compact() // removes k@1
	res, err := e.replay("lake.cmpforeigndel", replay.Options{Topic: topic, Branch: "rebuild", Publish: true})
	if _, ok := errors.AsType[*replay.DifferError](err); ok && !res.Published {
		return
	}
	after := heldOffsetsOf(t, e.openExisting("lake.cmpforeigndel", ""))
	t.Fatalf("publish of a replay of a compacted topic over a main with another engine's delete: err %v, published %v; main held the rows of offsets %v, now %v: the row of offset 1, which no log holds any more, is gone for good; want the publish refused (main holds a row at an offset the branch has none at)",
		err, res.Published, before, after)
}
