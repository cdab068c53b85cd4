package snapshot_test

import (
	"bytes"
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

// TestSegmentsWithoutIndexes: segments whose index files are gone are
// indexed by decoding them: the ledger, the summary and lookups read as
// before. The next floe maintain writes the indexes of segments written
// before indexes (here: without the digests floe records now), and not
// those of segments whose index digest the table records, which a new
// index would not match: their readers decode the segment, checking its
// digest.
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
	if got := indexFiles(t, segs); len(got) != 0 {
		t.Fatalf("after maintain, index files %v of segments with digests: want none written", got)
	}
	if got := ledger(t, freshTable(t, fresh)); !reflect.DeepEqual(got, whole) {
		t.Fatalf("ledger after maintain differs:\n%+v\nwant\n%+v", got, whole)
	}
	var digests []string
	for k := range tbl.Iceberg().Properties() {
		if strings.HasPrefix(k, snapshot.PropLedgerDigestPrefix) {
			digests = append(digests, k)
		}
	}
	if len(digests) != 2 {
		t.Fatalf("digest properties %v: want one per segment", digests)
	}
	txn := fresh.Iceberg().NewTransaction()
	if err := txn.RemoveProperties(digests); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	legacy := freshTable(t, fresh)
	if got := ledger(t, legacy); !reflect.DeepEqual(got, whole) {
		t.Fatalf("ledger without digests differs:\n%+v\nwant\n%+v", got, whole)
	}
	if _, err := legacy.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 100}); err != nil {
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

// TestArchiveDigests: the table records the SHA-256 of each segment and of
// its index, and the index those of the segment's blocks and their
// summaries. An altered index or summaries file is not used (the segment,
// checked against its digest, says the same); an altered segment fails
// every read that needs it, naming its digest, and an expiry that would
// merge it expires nothing.
func TestArchiveDigests(t *testing.T) {
	tbl, segs := twoSegments(t)
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	whole := ledger(t, freshTable(t, tbl))
	files := func(seg string) (index, summaries string) {
		index = indexFiles(t, []string{seg})[0]
		return index, strings.TrimSuffix(index, ".json") + ".summaries.jsonl"
	}

	// The index of the older segment edited (a commit's time), and the
	// summaries of the newer one (a block's span and the partition
	// directory).
	index, _ := files(segs[0])
	alterFile(t, index, `"timestamp-ms":17`, `"timestamp-ms":18`)
	_, summaries := files(segs[1])
	alterFile(t, summaries, `"high":240`, `"high":140`)
	alterFile(t, summaries, `[[0,200,240]]`, `[[0,200,140]]`)
	fresh := freshTable(t, tbl)
	if got := ledger(t, fresh); !reflect.DeepEqual(got, whole) {
		t.Fatalf("ledger with an altered index differs:\n%+v\nwant\n%+v", got, whole)
	}
	for _, off := range []int64{25, 105, 215} {
		if got, err := fresh.Locate(t.Context(), 0, tp, off); err != nil || !reflect.DeepEqual(got, whole.Where(tp, off)) {
			t.Fatalf("offset %d: %+v, %v; want %+v", off, got, err, whole.Where(tp, off))
		}
	}

	// A range of the newer segment widened, same length.
	alterFile(t, segs[1], `"0:210-220:0"`, `"0:210-229:0"`)
	fresh = freshTable(t, tbl)
	var ae *snapshot.ArchiveError
	if _, err := fresh.Ledger(); !errors.As(err, &ae) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("ledger of an altered segment: %v, want an *ArchiveError naming the SHA-256", err)
	}
	if _, err := fresh.Locate(t.Context(), 0, tp, 215); !errors.As(err, &ae) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("offset 215 in an altered segment: %v, want an *ArchiveError naming the SHA-256", err)
	}
	// Its index gone too: the segment is decoded, and checked whole.
	index, _ = files(segs[1])
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{}); !errors.As(err, &ae) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("open with an altered segment and no index: %v, want an *ArchiveError naming the SHA-256", err)
	}
}

// TestMergeOfAlteredSegment: an expiry that would merge a segment altered
// since it was written fails, and expires nothing.
func TestMergeOfAlteredSegment(t *testing.T) {
	tbl, segs := twoSegments(t)
	alterFile(t, segs[1], `"0:210-220:0"`, `"0:210-229:0"`)
	commitRanges(t, tbl, 26, 30)
	before := len(tbl.Iceberg().Metadata().Snapshots())
	_, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2})
	var ae *snapshot.ArchiveError
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "SHA-256") || !strings.Contains(err.Error(), "nothing was expired") {
		t.Fatalf("expiry merging an altered segment: %v, want an *ArchiveError naming the SHA-256, nothing expired", err)
	}
	if after := len(freshTable(t, tbl).Iceberg().Metadata().Snapshots()); after != before {
		t.Fatalf("%d snapshots after the failed expiry, %d before", after, before)
	}
}

// alterFile replaces old, which the file at path (a path or a file:// URI)
// must hold, by new of the same length, as an edit in the storage would.
func alterFile(t testing.TB, path, old, new string) {
	t.Helper()
	path = strings.TrimPrefix(path, "file://")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) || len(old) != len(new) {
		t.Fatalf("%s holds no %q to edit:\n%s", path, old, b)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCommitsWithDeadLettersReadsOnlyTheirBlocks: a lookup of a key's
// latest dead letter (where --key) read the whole ledger, archive included,
// for the commits that sent records of the row's partition to a dead-letter
// table. The older of two segments holds no dead letter; with its file gone,
// a fresh reader still finds the newer segment's commit that sent one past
// the offset asked, and the live commit's, while the whole ledger fails on
// the missing file.
func TestCommitsWithDeadLettersReadsOnlyTheirBlocks(t *testing.T) {
	tbl, _ := maintainTable(t, 2)
	dlq, err := snapshot.OpenDeadLetters(t.Context(), tbl.Catalog(), snapshot.DeadLetterName(tbl.Identifier()), tbl.Name(), true)
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
	if named := namedArchives(tbl); len(older) != 1 || len(named) != 2 {
		t.Fatalf("segments %v then %v: want one, then two", older, namedArchives(tbl))
	}
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 260, High: 270}, 265)
	if err := os.Remove(strings.TrimPrefix(older[0], "file://")); err != nil {
		t.Fatal(err)
	}
	fresh := freshTable(t, tbl)
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	var dead []mapping.Interval
	for c, err := range fresh.CommitsWithDeadLetters(t.Context(), 0, tp, 100) {
		if err != nil {
			t.Fatalf("commits with dead letters past offset 100, the older segment's file gone: %v", err)
		}
		for _, r := range c.Ranges {
			if r.DeadLetters > 0 {
				dead = append(dead, r.Interval)
			}
		}
	}
	if want := []mapping.Interval{{Low: 220, High: 230}, {Low: 260, High: 270}}; !slices.Equal(dead, want) {
		t.Errorf("ranges with dead letters %v, want %v", dead, want)
	}
	var ae *snapshot.ArchiveError
	if _, err := fresh.Ledger(); !errors.As(err, &ae) {
		t.Fatalf("whole ledger without the older segment: %v, want an *ArchiveError", err)
	}
}
