package snapshot_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// twoSegments returns a table whose archive is two segments: an older one
// holding the commits of [0, 200) of partition t/0 and a newer one holding
// [200, 240), with [240, 260) live; and the paths of the two segments,
// oldest first.
func twoSegments(t *testing.T) (*snapshot.Table, []string) {
	t.Helper()
	tbl, _ := maintainTable(t, 2)
	commitRanges(t, tbl, 2, 22)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	older := namedArchives(tbl)
	commitRanges(t, tbl, 22, 26)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	named := namedArchives(tbl)
	if len(older) != 1 || len(named) != 2 {
		t.Fatalf("segments %v then %v: want one, then two", older, named)
	}
	segs := []string{older[0], named[0]}
	if named[0] == older[0] {
		segs[1] = named[1]
	}
	return tbl, segs
}

// TestLocateReadsOnlyItsSegment: a lookup of one position reads the
// segment that holds it and no other. With the file of the older segment
// gone (its index stays), a fresh reader still opens the table, answers
// where offsets of the newer segment and of live snapshots are exactly as
// the whole ledger did, and summarises the ledger; reading the whole
// ledger, or an offset of the missing segment, fails on the missing file.
// Before segment indexes, opening the table read every segment and failed.
func TestLocateReadsOnlyItsSegment(t *testing.T) {
	tbl, segs := twoSegments(t)
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	whole := ledger(t, freshTable(t, tbl))
	if err := os.Remove(strings.TrimPrefix(segs[0], "file://")); err != nil {
		t.Fatal(err)
	}
	fresh := freshTable(t, tbl)
	for _, off := range []int64{205, 239, 255} {
		got, err := fresh.Locate(t.Context(), 0, tp, off)
		if err != nil {
			t.Fatalf("offset %d: %v", off, err)
		}
		if want := whole.Where(tp, off); !reflect.DeepEqual(got, want) {
			t.Fatalf("offset %d: located %+v, the whole ledger says %+v", off, got, want)
		}
	}
	sum, err := fresh.Summary(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sum.Next(), whole.Next()) || sum.Commits != len(whole.Commits) {
		t.Fatalf("summary: next %v, %d commits; ledger %v, %d", sum.Next(), sum.Commits, whole.Next(), len(whole.Commits))
	}
	var ae *snapshot.ArchiveError
	if _, err := fresh.Locate(t.Context(), 0, tp, 5); !errors.As(err, &ae) {
		t.Fatalf("offset 5, in the missing segment: %v, want an *ArchiveError", err)
	}
	if _, err := fresh.Ledger(); !errors.As(err, &ae) {
		t.Fatalf("whole ledger without a segment: %v, want an *ArchiveError", err)
	}
}

// TestSegmentsWithoutIndexes: segments written before indexes (their
// index files removed) are indexed by decoding them: the ledger, the
// summary and lookups read as before, and the next floe maintain writes
// their indexes.
func TestSegmentsWithoutIndexes(t *testing.T) {
	tbl, segs := twoSegments(t)
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	whole := ledger(t, freshTable(t, tbl))
	indexes := indexFiles(t, segs)
	if len(indexes) != 2 {
		t.Fatalf("index files %v: want one per segment", indexes)
	}
	for _, f := range indexes {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	fresh := freshTable(t, tbl)
	if got := ledger(t, fresh); !reflect.DeepEqual(got, whole) {
		t.Fatalf("ledger without indexes differs:\n%+v\nwant\n%+v", got, whole)
	}
	if got, err := fresh.Locate(t.Context(), 0, tp, 15); err != nil || !reflect.DeepEqual(got, whole.Where(tp, 15)) {
		t.Fatalf("offset 15: %+v, %v; want %+v", got, err, whole.Where(tp, 15))
	}
	if _, err := fresh.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 100}); err != nil {
		t.Fatal(err)
	}
	if got := indexFiles(t, segs); len(got) != 2 {
		t.Fatalf("after maintain, index files %v: want both written again", got)
	}
}

// indexFiles returns the index files of the segments that exist.
func indexFiles(t *testing.T, segs []string) []string {
	t.Helper()
	var out []string
	for _, s := range segs {
		dir, name := filepath.Split(strings.TrimPrefix(s, "file://"))
		f := filepath.Join(filepath.Dir(filepath.Clean(dir)), "floe-ledger-index", name)
		if _, err := os.Stat(f); err == nil {
			out = append(out, f)
		}
	}
	return out
}

// TestReconcileReadsOnlySegmentsWithDeadLetters: reconciling a dead-letter
// table with the ledger reads only the archive blocks holding a commit
// that names the table. The older of two segments holds no such commit;
// the newer one holds a commit whose dead letter is in; a live commit's is
// pending. With the older segment's file gone, a fresh reader reconciles:
// it adds the pending dead letter and keeps the archived commit's (a
// commit it did not find would have its rows removed as stale), while the
// whole ledger fails on the missing file. Before, reconciling decoded
// every branch's whole ledger and failed. Every commit keeps its ranges
// in a ranges file, whose live snapshots' summaries do not name the
// dead-letter table.
func TestReconcileReadsOnlySegmentsWithDeadLetters(t *testing.T) {
	tbl, _ := maintainTable(t, 2)
	cat := tbl.Catalog()
	upd := []table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{snapshot.PropInlineRangesMax: "0"})}
	if _, _, err := cat.CommitTable(t.Context(), tbl.Identifier(), nil, upd); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	dlq, err := snapshot.OpenDeadLetters(t.Context(), cat, snapshot.DeadLetterName(tbl.Identifier()), tbl.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	expire := func() {
		t.Helper()
		if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2, Logger: floetest.QuietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	commitRanges(t, tbl, 2, 22)
	expire()
	older := namedArchives(tbl)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 220, High: 230}, 225)
	commitRanges(t, tbl, 23, 26)
	expire()
	if named := namedArchives(tbl); len(older) != 1 || len(named) != 2 || !slices.Contains(named, older[0]) {
		t.Fatalf("segments %v then %v: want one, then two", older, named)
	}
	pendingCommit(t, cat, tbl, dlq, "t", 0, mapping.Interval{Low: 260, High: 270}, 265)
	if err := os.Remove(strings.TrimPrefix(older[0], "file://")); err != nil {
		t.Fatal(err)
	}
	fresh := freshTable(t, tbl)
	if res := reconcile(t, fresh, dlq); res.Added != 1 || res.Removed != 0 {
		t.Fatalf("reconciled %+v: want the pending commit added, nothing removed", res)
	}
	wantDeadLetters(t, dlq, "t/0/225", "t/0/265")
	var ae *snapshot.ArchiveError
	if _, err := fresh.Ledger(); !errors.As(err, &ae) {
		t.Fatalf("whole ledger without the older segment: %v, want an *ArchiveError", err)
	}
}
