package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/internal/memprobe"
	"github.com/floe-dev/floe/mapping"
)

// archivedHistory returns an archive index of n snapshots 1..n, each the
// parent of the next but for gap (the parent it names is not archived;
// 0: none), floe commits of one range each; commit dlAt names dead-letter
// table "lake.dl". And metadata that holds none of them: the ancestry of
// snapshot n lies in the archive alone.
func archivedHistory(t testing.TB, n, gap, dlAt int) (table.Metadata, *archiveIndex) {
	t.Helper()
	meta, err := table.NewMetadata(iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64}),
		iceberg.UnpartitionedSpec, table.UnsortedSortOrder, "file:///tmp/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	return meta, newArchiveIndex([]segment{historySegment(t, "p", history(t, n, gap, dlAt))}, nil)
}

// history returns the snapshots of archivedHistory.
func history(t testing.TB, n, gap, dlAt int) []ArchivedSnapshot {
	return historyOf(t, n, gap, dlAt, 1)
}

// historyOf is history with a range on each of partitions partitions.
func historyOf(t testing.TB, n, gap, dlAt, partitions int) []ArchivedSnapshot {
	t.Helper()
	snaps := make([]ArchivedSnapshot, 0, n)
	for i := 1; i <= n; i++ {
		c := mapping.Commit{ID: fmt.Sprintf("c%d", i), Writer: "w"}
		for p := range partitions {
			c.Ranges = append(c.Ranges, mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: int32(p)},
				Interval: mapping.Interval{Low: int64(i-1) * 10, High: int64(i) * 10}, Records: 10})
		}
		if i == dlAt {
			c.DeadLetterTable, c.DeadLetterFiles = "lake.dl", []string{"dl/f.parquet"}
		}
		props, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		s := ArchivedSnapshot{SnapshotID: int64(i), TimestampMs: 1000 + int64(i), Properties: props}
		if i > 1 {
			parent := int64(i - 1)
			if i == gap {
				parent = int64(n + 1000)
			}
			s.ParentID = &parent
		}
		snaps = append(snaps, s)
	}
	return snaps
}

// historySegment returns a segment at path holding snaps, indexed.
func historySegment(t testing.TB, path string, snaps []ArchivedSnapshot) segment {
	t.Helper()
	b, err := json.Marshal(&Archive{Format: ArchiveFormat, TableUUID: "u", Snapshots: snaps})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := buildIndex(bytes.NewReader(b), "u")
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.slim(); err != nil {
		t.Fatal(err)
	}
	return segment{key: "k-" + path, path: path, ix: ix}
}

// TestArchiveIndexAcrossSegments: a snapshot is found in the segment that
// holds it, in the first of two that do, and counted once; a new index
// holds the one before when it shares its segments and holds each entry
// of those it does not (a merge absorbed them), and keeps its walks only
// then.
func TestArchiveIndexAcrossSegments(t *testing.T) {
	meta, _ := archivedHistory(t, 1, 0, 0)
	snaps := history(t, 300, 0, 40)
	old, overlap, rest := historySegment(t, "old", snaps[:200]), historySegment(t, "overlap", snaps[149:250]), historySegment(t, "rest", snaps[200:])
	a := newArchiveIndex([]segment{old, overlap, rest}, nil)
	if a.Len() != 300 {
		t.Fatalf("Len %d, want 300", a.Len())
	}
	for id, want := range map[int64]string{1: "old", 170: "old", 220: "overlap", 260: "rest"} {
		e, at, ok := a.find(id)
		if !ok || e.id != id || at.path != want || at.ix.entries[at.entry].id != id {
			t.Fatalf("find(%d): %+v at %s (%v), want in %s", id, e, at.path, ok, want)
		}
	}
	if a.has(301) || a.has(0) {
		t.Fatal("found a snapshot no segment holds")
	}

	// An expiry archived 251-300 and merged them with 201-250.
	prev := newArchiveIndex([]segment{old, historySegment(t, "small", snaps[200:250])}, nil)
	if te := ancestryEnd(meta, prev, 250); te != nil {
		t.Fatal(te)
	}
	if prev.Len() != 250 {
		t.Fatalf("Len %d, want 250", prev.Len())
	}
	next := newArchiveIndex([]segment{old, rest}, prev)
	if _, kept := next.tails[250]; !kept || next.Len() != 300 || next.distinct() != 300 {
		t.Fatalf("after a merge: walk kept %v, Len %d (counted from the index before), %d counted afresh", kept, next.Len(), next.distinct())
	}
	if te := ancestryEnd(meta, next, 300); te != nil {
		t.Fatal(te)
	}
	// The merged segment lacks 201: the new index does not hold the
	// old one.
	short := newArchiveIndex([]segment{old, historySegment(t, "short", snaps[201:])}, prev)
	if len(short.tails) != 0 || short.Len() != 299 {
		t.Fatalf("without 201: %d walks kept, Len %d", len(short.tails), short.Len())
	}
}

// TestAncestryEndAgreesWithAncestry: the memoized walk through the
// archive (ancestryEnd, archiveIndex.tail) gives ancestry's verdict, the
// same oldest snapshot when the history is truncated, and the dead-letter
// tables the archived commits name; asked again, it answers from the
// memo alike.
func TestAncestryEndAgreesWithAncestry(t *testing.T) {
	for _, tc := range []struct {
		name string
		gap  int
	}{{"complete", 0}, {"truncated", 120}} {
		meta, ix := archivedHistory(t, 300, tc.gap, 40)
		_, want := ancestry(meta, ix, 300)
		for range 2 {
			got := ancestryEnd(meta, ix, 300)
			if (got == nil) != (want == nil) || (got != nil && *got != *want) {
				t.Fatalf("%s: ancestryEnd %+v, ancestry %+v", tc.name, got, want)
			}
			tail, pure := ix.tail(meta, 300)
			wantNames := []string{"lake.dl"}
			if tc.gap != 0 {
				wantNames = nil // commit 40 lies below the gap
			}
			if !pure || !slices.Equal(tail.deadLetters, wantNames) {
				t.Fatalf("%s: tail %+v (pure %v), want dead-letter tables %v", tc.name, tail, pure, wantNames)
			}
		}
	}
}

// TestAncestryEndAfterExpiry: the index of a table version after an
// expiry keeps the previous index's memoized walks that reached the first
// snapshot, and a walk from the new head ends where it meets one, with
// the verdict and dead-letter tables of a walk of the whole history; a
// truncated walk is not kept.
func TestAncestryEndAfterExpiry(t *testing.T) {
	for _, tc := range []struct {
		name string
		gap  int
	}{{"complete", 0}, {"truncated", 120}} {
		meta, before := archivedHistory(t, 200, tc.gap, 40)
		if te := ancestryEnd(meta, before, 200); (te == nil) != (tc.gap == 0) {
			t.Fatalf("%s: before the expiry: %+v", tc.name, te)
		}
		_, full := archivedHistory(t, 300, tc.gap, 40)
		after := newArchiveIndex(full.segs, before)
		if _, kept := after.tails[200]; kept != (tc.gap == 0) {
			t.Fatalf("%s: the walk from 200 kept: %v", tc.name, kept)
		}
		_, want := ancestry(meta, full, 300)
		got := ancestryEnd(meta, after, 300)
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Fatalf("%s: ancestryEnd %+v, ancestry %+v", tc.name, got, want)
		}
		tail, _ := after.tail(meta, 300)
		wantTail, _ := full.tail(meta, 300)
		if tail.complete != wantTail.complete || tail.oldest != wantTail.oldest || !slices.Equal(tail.deadLetters, wantTail.deadLetters) {
			t.Fatalf("%s: tail %+v, the whole walk's %+v", tc.name, tail, wantTail)
		}
	}
	// An index that lacks an entry of the one before keeps none of its
	// walks.
	meta, before := archivedHistory(t, 200, 0, 40)
	ancestryEnd(meta, before, 200)
	_, other := archivedHistory(t, 100, 0, 40)
	if a := newArchiveIndex(other.segs, before); len(a.tails) != 0 {
		t.Fatalf("kept %d walks of an index it does not hold", len(a.tails))
	}
}

// BenchmarkAncestryWalk: what a writer's maintenance paid per walk of a
// history of 30,000 archived snapshots, each run, for every branch and
// tag (ancestry), against the memoized walk (ancestryEnd) that the same
// runs take now, and the index of the table version after an expiry
// with the first walk from its new head, keeping the walks of the index
// before or not (after-expiry/kept=false: a walk of the whole history,
// at every expiry before indexes kept them).
//
//	go test ./snapshot/ -run '^$' -bench AncestryWalk
func BenchmarkAncestryWalk(b *testing.B) {
	meta, ix := archivedHistory(b, 30_000, 0, 40)
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			if _, te := ancestry(meta, ix, 30_000); te != nil {
				b.Fatal(te)
			}
		}
	})
	b.Run("memoized", func(b *testing.B) {
		for b.Loop() {
			if te := ancestryEnd(meta, ix, 30_000); te != nil {
				b.Fatal(te)
			}
		}
	})
	// The first walk after an expiry archived 20 more snapshots: the
	// table's new index, and a walk down to where the last walk began;
	// against the same without the walks of the index before.
	_, before := archivedHistory(b, 29_980, 0, 40)
	if te := ancestryEnd(meta, before, 29_980); te != nil {
		b.Fatal(te)
	}
	for _, kept := range []bool{true, false} {
		prev := before
		if !kept {
			prev = nil
		}
		b.Run(fmt.Sprintf("after-expiry/kept=%v", kept), func(b *testing.B) {
			for b.Loop() {
				if te := ancestryEnd(meta, newArchiveIndex(ix.segs, prev), 30_000); te != nil {
					b.Fatal(te)
				}
			}
		})
	}
	// As an expiry leaves the archive: one large segment both indexes
	// share, and the small one before merged with the snapshots
	// archived into a new one.
	snaps := history(b, 30_000, 0, 40)
	large := historySegment(b, "large", snaps[:29_000])
	prev := newArchiveIndex([]segment{large, historySegment(b, "small", snaps[29_000:29_980])}, nil)
	if te := ancestryEnd(meta, prev, 29_980); te != nil {
		b.Fatal(te)
	}
	merged := []segment{large, historySegment(b, "merged", snaps[29_000:])}
	b.Run("after-expiry/shared-segment", func(b *testing.B) {
		for b.Loop() {
			if te := ancestryEnd(meta, newArchiveIndex(merged, prev), 30_000); te != nil {
				b.Fatal(te)
			}
		}
	})
}

// BenchmarkLedgerParts measures the ledger parts a writer's compaction
// asks for after an expiry archived 20 more snapshots of 30,000: the
// table's new index (one large segment shared with the index before, the
// small one before merged with the snapshots archived into a new one)
// and its walk, with the memoized parts of the index before kept
// (keepLedgers) or not (kept=false: a walk of the whole history, at every
// compaction run before they were kept).
//
//	go test ./snapshot/ -run '^$' -bench LedgerParts
func BenchmarkLedgerParts(b *testing.B) {
	meta, _ := archivedHistory(b, 1, 0, 0)
	snaps := history(b, 30_000, 0, 40)
	large := historySegment(b, "large", snaps[:29_000])
	before := newArchiveIndex([]segment{large, historySegment(b, "small", snaps[29_000:29_980])}, nil)
	if _, ok := before.parts(meta, 29_980); !ok {
		b.Fatal("incomplete walk")
	}
	merged := []segment{large, historySegment(b, "merged", snaps[29_000:])}
	for _, kept := range []bool{true, false} {
		prev := before
		if !kept {
			prev = nil
		}
		b.Run(fmt.Sprintf("after-expiry/kept=%v", kept), func(b *testing.B) {
			for b.Loop() {
				if _, ok := newArchiveIndex(merged, prev).parts(meta, 30_000); !ok {
					b.Fatal("incomplete walk")
				}
			}
		})
	}
}

// BenchmarkArchiveIndexHeap measures what a table holds per archived
// snapshot (archive_B/snapshot): the live heap of the index of one
// segment, read from its index file as a reader reads it, after a
// collection, over its entries, less the segment's summary and the
// locations of its partition directory's lines, which it reports apart
// (summary_KiB/segment: one per segment, and a table names a number of
// segments that grows with the logarithm of its history). With
// partitions=1 (50,000 commits of one range) it is the entries: 56 bytes
// with one index by id across segments, 28.5 now. With partitions=1000
// (2,000 commits of a range on each of 1,000 partitions, a busy wide
// topic) the blocks' summaries were 873 bytes more until they moved to a
// file of their own, read by the block. Both fail above 40 bytes, since
// that grows every process's memory with the table's history (issue 23).
//
//	go test ./snapshot/ -run '^$' -bench ArchiveIndexHeap -benchtime 1x
func BenchmarkArchiveIndexHeap(b *testing.B) {
	for _, tc := range []struct{ commits, partitions int }{{50_000, 1}, {2_000, 1_000}} {
		b.Run(fmt.Sprintf("partitions=%d", tc.partitions), func(b *testing.B) {
			snaps := historyOf(b, tc.commits, 0, 40, tc.partitions)
			file, err := json.Marshal(&Archive{Format: ArchiveFormat, TableUUID: "u", Snapshots: snaps})
			if err != nil {
				b.Fatal(err)
			}
			snaps = nil
			dir := b.TempDir()
			for _, d := range []string{archiveFolder, indexFolder} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			path := dir + "/" + archiveFolder + "/00001-heap.json"
			if err := os.WriteFile(path, file, 0o644); err != nil {
				b.Fatal(err)
			}
			file = nil
			if _, err := writeIndex(iceio.LocalFS{}, "u", path); err != nil {
				b.Fatal(err)
			}
			var perSnapshot, summary float64
			for b.Loop() {
				// Twice: the heap goal the first collection leaves can keep
				// some garbage of history's for the next.
				runtime.GC()
				runtime.GC()
				before := memprobe.Live()
				ix, err := readIndex(iceio.LocalFS{}, "u", path, segmentDigest{})
				if err != nil || ix.built.Load() {
					b.Fatalf("read the index: %v (built from the segment: %v)", err, ix != nil && ix.built.Load())
				}
				a := newArchiveIndex([]segment{{key: "k", path: path, ix: ix}}, nil)
				runtime.GC()
				runtime.GC()
				held := memprobe.Live()
				if a.Len() != tc.commits {
					b.Fatalf("Len %d, want %d", a.Len(), tc.commits)
				}
				ix.Summary, ix.Partitions = summaryJSON{}, nil
				runtime.GC()
				runtime.GC()
				summary = float64(held - memprobe.Live())
				perSnapshot = (float64(held-before) - summary) / float64(tc.commits)
				runtime.KeepAlive(a)
			}
			b.ReportMetric(perSnapshot, "archive_B/snapshot")
			b.ReportMetric(summary/1024, "summary_KiB/segment")
			if perSnapshot > 40 {
				b.Fatalf("the archive index holds %.1f bytes per archived snapshot, want at most 40", perSnapshot)
			}
		})
	}
}

// TestArchiveIndexAgreesWithModel: on random archives of up to five
// segments, ids repeated within and across them, find returns the first
// segment's entry, and in it the first in file order; Len counts each
// snapshot once; and holds agrees with looking up every entry.
func TestArchiveIndexAgreesWithModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		var segs []segment
		first := map[int64]string{}
		for si := range 1 + r.IntN(5) {
			var snaps []ArchivedSnapshot
			for range r.IntN(30) {
				id := int64(r.IntN(60))
				s := ArchivedSnapshot{SnapshotID: id, TimestampMs: id}
				if r.IntN(3) == 0 {
					s.Properties = map[string]string{mapping.KeyDeadLetterTable: fmt.Sprintf("dl%d", r.IntN(4))}
				}
				snaps = append(snaps, s)
			}
			seg := historySegment(t, fmt.Sprintf("s%d", si), snaps)
			segs = append(segs, seg)
			for _, s := range snaps {
				if _, ok := first[s.SnapshotID]; !ok {
					first[s.SnapshotID] = seg.path
				}
			}
		}
		a := newArchiveIndex(segs, nil)
		if a.Len() != len(first) {
			t.Fatalf("archive %d: Len %d, want %d", iter, a.Len(), len(first))
		}
		for id := int64(-1); id < 62; id++ {
			e, at, ok := a.find(id)
			want, wok := first[id]
			if ok != wok || (ok && (at.path != want || e.id != id || at.ix.entries[at.entry].id != id)) {
				t.Fatalf("archive %d: find(%d) in %q (%v), want in %q (%v)", iter, id, at.path, ok, want, wok)
			}
			if ok && slices.ContainsFunc(at.ix.entries[:at.entry], func(e archivedEntry) bool { return e.id == id }) {
				t.Fatalf("archive %d: find(%d) is not the first entry of its segment", iter, id)
			}
		}
		var sub []segment
		for _, s := range segs {
			if r.IntN(2) == 0 {
				sub = append(sub, s)
			}
		}
		b := newArchiveIndex(sub, nil)
		want := true
		for _, s := range segs {
			for _, e := range s.ix.entries {
				want = want && b.has(e.id)
			}
		}
		if b.holds(a) != want {
			t.Fatalf("archive %d: holds %v, want %v", iter, b.holds(a), want)
		}
	}
}

// TestExpiryKeepsSegmentIndexes: across a writer's expiries, the table
// keeps the index of each segment it still names (the new index costs
// only the new segment, and holds compares the others by identity), the
// new segment's is ready for lookups, and the table agrees with one
// opened afresh.
func TestExpiryKeepsSegmentIndexes(t *testing.T) {
	tbl, _ := internalTable(t, OpenOptions{Create: true})
	off := int64(0)
	shared := 0
	for round := range 12 {
		for range 3 + round%4 {
			r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t"}, Interval: mapping.Interval{Low: off, High: off + 10}, Records: 10}
			off += 10
			if _, err := tbl.Commit(t.Context(), Flush{Ranges: []mapping.Range{r}}, CommitOptions{Writer: "test"}); err != nil {
				t.Fatal(err)
			}
		}
		before := map[string]*segmentIndex{}
		for _, s := range tbl.segments {
			before[s.path] = s.ix
		}
		if _, err := tbl.Maintain(t.Context(), MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
			t.Fatal(err)
		}
		for _, s := range tbl.segments {
			if ix, ok := before[s.path]; ok {
				if ix != s.ix {
					t.Fatalf("round %d: the index of segment %s was read again", round, s.path)
				}
				shared++
			}
			if len(s.ix.byID) != len(s.ix.entries) {
				t.Fatalf("round %d: segment %s: %d entries, %d in id order", round, s.path, len(s.ix.entries), len(s.ix.byID))
			}
		}
		fresh, err := Open(t.Context(), tbl.cat, tbl.ident, OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fresh.archive.Len() != tbl.archive.Len() {
			t.Fatalf("round %d: %d archived, %d in the table opened afresh", round, tbl.archive.Len(), fresh.archive.Len())
		}
		if l, err := tbl.Ledger(); err != nil || int64(len(l.Commits))*10 != off {
			t.Fatalf("round %d: ledger of %d commits (%v), want %d", round, len(l.Commits), err, off/10)
		}
	}
	if shared == 0 {
		t.Fatal("no expiry kept a segment of the one before")
	}
}

// TestArchiveCacheShares: a handle opened with another's ArchiveCache
// takes the indexes of the segments that one read or wrote, also of a
// segment written after it opened, and reads the others; one opened
// without reads its own.
func TestArchiveCacheShares(t *testing.T) {
	tbl, _ := internalTable(t, OpenOptions{Create: true})
	off := int64(0)
	commitAndExpire := func() {
		t.Helper()
		for range 4 {
			r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t"}, Interval: mapping.Interval{Low: off, High: off + 10}, Records: 10}
			off += 10
			if _, err := tbl.Commit(t.Context(), Flush{Ranges: []mapping.Range{r}}, CommitOptions{Writer: "test"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tbl.Maintain(t.Context(), MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		commitAndExpire()
	}
	same := func(h *Table) bool {
		t.Helper()
		if len(h.segments) == 0 || len(h.segments) != len(tbl.segments) {
			t.Fatalf("%d segments, the writer's handle %d", len(h.segments), len(tbl.segments))
		}
		for i, s := range h.segments {
			if s.path != tbl.segments[i].path {
				t.Fatalf("segment %d: %s, the writer's handle %s", i, s.path, tbl.segments[i].path)
			}
			if s.ix != tbl.segments[i].ix {
				return false
			}
		}
		return true
	}
	shared, err := Open(t.Context(), tbl.cat, tbl.ident, OpenOptions{ArchiveCache: tbl.ArchiveCache()})
	if err != nil {
		t.Fatal(err)
	}
	if !same(shared) {
		t.Fatal("a handle opened with the writer's cache read a segment's index again")
	}
	own, err := Open(t.Context(), tbl.cat, tbl.ident, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if same(own) {
		t.Fatal("a handle opened without the cache shares the writer's indexes")
	}
	// A segment the writer writes after: the shared handle takes it at
	// its next refresh.
	commitAndExpire()
	if err := shared.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !same(shared) || shared.archive.Len() != tbl.archive.Len() {
		t.Fatalf("after the writer's expiry: shared %v, %d archived against %d", same(shared), shared.archive.Len(), tbl.archive.Len())
	}
}

// TestOnChainsOutlivesAbsorbedSegment: compaction's planner walks the
// ledger with onChains; a tiled archived block is met by its summary
// (MeetTiled) and not read. When a later block's segment was absorbed
// and deleted by another writer's expiry meanwhile, the walk reloads
// the table and walks again (commitsWhere skips the commits it already
// yielded): a block met by its summary must not be met a second time,
// or its span overlaps itself and every chain it met reads as broken.
func TestOnChainsOutlivesAbsorbedSegment(t *testing.T) {
	tbl, _ := internalTable(t, OpenOptions{Create: true})
	tp := mapping.TopicPartition{Topic: "t"}
	commit := func(r mapping.Range) {
		t.Helper()
		r.TopicPartition = tp
		if !r.Lost {
			r.Records = r.Len()
		}
		if _, err := tbl.Commit(t.Context(), Flush{Ranges: []mapping.Range{r}}, CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	iv := func(low, high int64) mapping.Range {
		return mapping.Range{Interval: mapping.Interval{Low: low, High: high}}
	}
	maintain := func() {
		t.Helper()
		if _, err := tbl.Maintain(t.Context(), MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// S1: a large segment of tiled ranges [0, 190).
	for i := range int64(20) {
		commit(iv(10*i, 10*i+10))
	}
	maintain()
	s1 := tbl.segments[0].path
	// S2: [190, 210) then a lost range past the chain: not tiled, so
	// the walk reads its block.
	commit(iv(200, 210))
	lost := iv(210, 220)
	lost.Lost = true
	commit(lost)
	commit(iv(220, 230))
	maintain()
	if len(tbl.segments) != 2 {
		t.Fatalf("the test needs two segments, the table names %d", len(tbl.segments))
	}
	i2 := slices.IndexFunc(tbl.segments, func(s segment) bool { return s.path != s1 })
	if i2 < 0 {
		t.Fatal("no second segment")
	}
	s2 := tbl.segments[i2].path
	reader, err := Open(t.Context(), tbl.cat, tbl.ident, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	span := []mapping.Span{{TopicPartition: tp, Interval: mapping.Interval{Low: 5, High: 205}}}
	held, err := reader.onChains(t.Context(), span)
	if err != nil || held[0].Len() == 0 {
		t.Fatalf("before the absorption: held %v, %v", held, err)
	}
	// Another writer's expiry absorbs S2 and deletes it.
	commit(iv(230, 240))
	maintain()
	if slices.ContainsFunc(tbl.segments, func(s segment) bool { return s.path == s2 }) {
		t.Fatalf("segment %s is still named: the test needs it absorbed", s2)
	}
	held, err = reader.onChains(t.Context(), span)
	if err != nil {
		t.Fatal(err)
	}
	if held[0].Len() == 0 {
		t.Fatal("[5, 205) lies on the chain [0, 210) of the ledger, but onChains, after reloading the table mid-walk, reports it broken")
	}
}

// TestArchiveLenCountsSegmentNamedTwiceOnce: countFrom must equal distinct()
// when two named segments are the same file (one index): a table whose
// properties name one segment path twice.
func TestArchiveLenCountsSegmentNamedTwiceOnce(t *testing.T) {
	snaps := history(t, 300, 0, 40)
	old := historySegment(t, "old", snaps[:200])
	prev := newArchiveIndex([]segment{old}, nil)
	if prev.Len() != 200 {
		t.Fatalf("Len %d, want 200", prev.Len())
	}
	rest := historySegment(t, "rest", snaps[200:])
	again := rest
	again.key = "k-rest-again"
	next := newArchiveIndex([]segment{old, rest, again}, prev)
	if next.Len() != next.distinct() {
		t.Fatalf("Len %d counted from the index before, %d counted afresh", next.Len(), next.distinct())
	}
}

// partsShape is what a test compares of ledger parts: each one's segment,
// block, wholeness and commits.
func partsShape(ps []ledgerPart) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s#%d whole=%v %v", p.at.path, p.at.block, p.whole, p.commitIDs()))
	}
	return out
}

// TestLedgerPartsKeptAcrossExpiries: over random expiries, each writing a
// segment of what it archived and absorbing the newest segments as
// planSegment does, the ledger parts an index walks from the memo it kept
// of the one before (keepLedgers) are those of an index built afresh.
// Entries are padded so that segments hold several blocks.
func TestLedgerPartsKeptAcrossExpiries(t *testing.T) {
	meta, _ := archivedHistory(t, 1, 0, 0)
	const n = 600
	snaps := history(t, n, 0, 0)
	pad := string(bytes.Repeat([]byte("x"), 64<<10))
	for i := range snaps {
		snaps[i].Properties["pad"] = pad
	}
	rng := rand.New(rand.NewPCG(7, 23))
	var (
		segs     []segment
		prev     *archiveIndex
		archived int
		kept     int
	)
	for step := 0; archived < n; step++ {
		fresh := min(n-archived, 1+rng.IntN(40))
		first := archived
		// Absorb the newest segments as planSegment does.
		for len(segs) > 0 && fresh*segmentMergeRatio >= len(segs[len(segs)-1].ix.entries) {
			first -= len(segs[len(segs)-1].ix.entries)
			segs = segs[:len(segs)-1]
		}
		archived += fresh
		segs = append(slices.Clip(segs), historySegment(t, fmt.Sprintf("s%d", step), snaps[first:archived]))
		a := newArchiveIndex(segs, prev)
		if step > 0 && len(a.ledgers) > 0 {
			kept++
		}
		got, ok := a.parts(meta, int64(archived))
		want, wantOK := newArchiveIndex(segs, nil).parts(meta, int64(archived))
		if !ok || !wantOK {
			t.Fatalf("step %d: complete %v, afresh %v", step, ok, wantOK)
		}
		if g, w := partsShape(got), partsShape(want); !slices.Equal(g, w) {
			t.Fatalf("step %d (%d archived, %d segments):\n got %v\nwant %v", step, archived, len(segs), g, w)
		}
		var ids []int64
		for _, p := range got {
			ids = append(ids, p.commitIDs()...)
		}
		if len(ids) != archived || ids[0] != 1 || ids[len(ids)-1] != int64(archived) {
			t.Fatalf("step %d: parts hold %d commits, want 1..%d", step, len(ids), archived)
		}
		prev = a
	}
	if kept == 0 {
		t.Fatal("no index kept the memoized parts of the one before")
	}
}
