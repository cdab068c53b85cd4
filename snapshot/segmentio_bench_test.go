package snapshot

import (
	"fmt"
	"runtime"
	"testing"

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
	entry := func(i int) ArchivedSnapshot {
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
	a := &Archive{Format: ArchiveFormat, TableUUID: uuidStr}
	for i := range n {
		a.Snapshots = append(a.Snapshots, entry(i))
	}
	path, ix, err := writeSegment(ctx, tbl.tbl, a.Len(), a.Snapshots, nil)
	if err != nil {
		b.Fatal(err)
	}
	a = nil
	plan := segmentPlan{fresh: []ArchivedSnapshot{entry(n)}, absorbed: []segment{{key: segmentKey(path), path: path, ix: ix}}}
	var mergeHeap, wholeHeap uint64
	for b.Loop() {
		runtime.GC()
		var merged *segmentIndex
		peak, before := memprobe.Peak(func() {
			if _, merged, err = plan.write(ctx, tbl.tbl); err != nil {
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
			if whole, err = tbl.readSegment(ctx, path); err != nil {
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
