package snapshot

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/floe-dev/floe/internal/memprobe"
	"github.com/floe-dev/floe/mapping"
)

// BenchmarkSegmentMerge measures the live heap of the expiry's segment
// merge when it absorbs a segment of 20,000 entries,
// each a commit of 20 partitions of a 200-partition topic with its file
// group, as the soak's sink writes them (about 1 KB each): the merge
// reads the segment one entry at a time, so its peak heap
// (merge_heap_MiB) is that of the new segment's slim index, not of the
// segment. The baseline, measured in the same run, is the segment decoded
// whole (whole_heap_MiB), which is what the merge held before (with
// more: the segment's bytes and its index); the benchmark fails when the
// merge holds more than a quarter of it.
//
//	go test ./snapshot/ -run '^$' -bench SegmentMerge -benchtime 1x
func BenchmarkSegmentMerge(b *testing.B) {
	const n = 20_000
	ctx := b.Context()
	tbl, dir := internalTable(b, OpenOptions{Create: true})
	uuidStr := tbl.tbl.Metadata().TableUUID().String()
	entry := func(i int) ArchivedSnapshot { return soakEntry(b, dir, i) }
	a := &Archive{Format: ArchiveFormat, TableUUID: uuidStr}
	for i := range n {
		a.Snapshots = append(a.Snapshots, entry(i))
	}
	path, ix, digest, err := writeSegment(ctx, tbl.tbl, a.Len(), a.Snapshots, nil)
	if err != nil {
		b.Fatal(err)
	}
	a = nil
	plan := segmentPlan{fresh: []ArchivedSnapshot{entry(n)}, absorbed: []segment{{key: segmentKey(path), path: path, digest: digest, ix: ix}}}
	var mergeHeap, wholeHeap uint64
	for b.Loop() {
		runtime.GC()
		var merged *segmentIndex
		peak, before := memprobe.Peak(func() {
			if _, merged, _, err = plan.write(ctx, tbl.tbl); err != nil {
				b.Fatal(err)
			}
		})
		mergeHeap = peak - before
		if len(merged.entries) != n+1 {
			b.Fatalf("the merged segment holds %d entries, want %d", len(merged.entries), n+1)
		}
		runtime.GC()
		var whole *Archive
		peak, before = memprobe.Peak(func() {
			if whole, err = tbl.readSegment(ctx, segment{path: path, digest: digest}); err != nil {
				b.Fatal(err)
			}
		})
		wholeHeap = peak - before
		runtime.KeepAlive(whole)
	}
	b.ReportMetric(float64(mergeHeap)/(1<<20), "merge_heap_MiB")
	b.ReportMetric(float64(wholeHeap)/(1<<20), "whole_heap_MiB")
	b.ReportMetric(float64(mergeHeap)/float64(wholeHeap), "merge/whole")
	if mergeHeap*4 > wholeHeap {
		b.Errorf("the merge held %.1f MiB, more than a quarter of the %.1f MiB of the segment decoded whole", float64(mergeHeap)/(1<<20), float64(wholeHeap)/(1<<20))
	}
}

// soakEntry is archived entry i as the soak's sink writes them (about 1
// KB): a commit of 20 partitions of a 200-partition topic with its file
// group, a table under dir.
func soakEntry(b *testing.B, dir string, i int) ArchivedSnapshot {
	c := mapping.Commit{ID: uuid.NewString(), Writer: "bench"}
	g := mapping.FileGroup{Files: []string{fmt.Sprintf("file://%s/wh/lake.db/t/data/%05d-%s.parquet", dir, i, uuid.NewString())}}
	for p := range 20 {
		r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "soak", Partition: int32((20*i + p) % 200)}, Interval: mapping.Interval{Low: int64(i), High: int64(i + 1)}}
		c.Ranges = append(c.Ranges, r)
		g.Spans = append(g.Spans, mapping.Span{TopicPartition: r.TopicPartition, Interval: r.Interval})
	}
	c.FileGroups = []mapping.FileGroup{g}
	props, err := c.Encode()
	if err != nil {
		b.Fatal(err)
	}
	id, parent := int64(i+1), int64(i)
	s := ArchivedSnapshot{SnapshotID: id, TimestampMs: 1_000_000 + int64(i), Properties: props}
	if i > 0 {
		s.ParentID = &parent
	}
	return s
}

// BenchmarkOpenSharedArchive measures what opening a handle of a table
// costs in its ledger archive, a segment of 20,000 entries of the soak's
// shape: read afresh (fresh), against taken from another handle's
// ArchiveCache (shared), as a sink's scheduled compaction opens its
// handle at each run. It reports each open's time and peak live heap, and
// fails when the shared open holds more than a tenth of the fresh one's
// heap: before the cache, every scheduled compaction read the whole
// archive's indexes again.
//
//	go test ./snapshot/ -run '^$' -bench OpenSharedArchive -benchtime 1x
func BenchmarkOpenSharedArchive(b *testing.B) {
	const n = 20_000
	ctx := b.Context()
	tbl, dir := internalTable(b, OpenOptions{Create: true})
	snaps := make([]ArchivedSnapshot, n)
	for i := range n {
		snaps[i] = soakEntry(b, dir, i)
	}
	path, _, _, err := writeSegment(ctx, tbl.tbl, n, snaps, nil)
	if err != nil {
		b.Fatal(err)
	}
	snaps = nil
	if err := tbl.SetProperties(ctx, map[string]string{segmentKey(path): path}); err != nil {
		b.Fatal(err)
	}
	if tbl.archive.Len() != n {
		b.Fatalf("the table holds %d archived entries, want %d", tbl.archive.Len(), n)
	}
	open := func(cache *ArchiveCache) (time.Duration, uint64) {
		runtime.GC()
		start := time.Now()
		var h *Table
		peak, before := memprobe.Peak(func() {
			if h, err = Open(ctx, tbl.cat, tbl.ident, OpenOptions{ArchiveCache: cache}); err != nil {
				b.Fatal(err)
			}
		})
		took := time.Since(start)
		if h.archive.Len() != n {
			b.Fatalf("the handle holds %d archived entries, want %d", h.archive.Len(), n)
		}
		return took, peak - before
	}
	var freshT, sharedT time.Duration
	var freshHeap, sharedHeap uint64
	for b.Loop() {
		freshT, freshHeap = open(nil)
		sharedT, sharedHeap = open(tbl.ArchiveCache())
	}
	b.ReportMetric(freshT.Seconds()*1000, "fresh_ms")
	b.ReportMetric(sharedT.Seconds()*1000, "shared_ms")
	b.ReportMetric(float64(freshHeap)/(1<<20), "fresh_heap_MiB")
	b.ReportMetric(float64(sharedHeap)/(1<<20), "shared_heap_MiB")
	if sharedHeap*10 > freshHeap {
		b.Errorf("the shared open held %.1f MiB, more than a tenth of the %.1f MiB of the fresh one", float64(sharedHeap)/(1<<20), float64(freshHeap)/(1<<20))
	}
}
