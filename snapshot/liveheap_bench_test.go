package snapshot_test

import (
	"testing"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkLiveHeap commits as a live sink does, with the in-sink
// maintenance after each commit (Table.AutoMaintain at the default
// retention: snapshots held at about 100, the others archived), and
// measures the live heap (after a GC) once a tenth of the commits are in
// and at the end. It fails when the end's is more than 1.25 times the
// tenth's: what a writer's table holds must not grow with its history
// (issue 23). FLOE_BENCH_COMMITS sets the commits (3,000), of one range
// on each of 4 partitions and no rows; FLOE_BENCH_HEAPPROFILE names a
// folder for heap profiles at both points (heap-N.pprof).
//
//	go test ./snapshot/ -run '^$' -bench LiveHeap -benchtime 1x
func BenchmarkLiveHeap(b *testing.B) {
	commits := floetest.BenchCommits(b, 3000)
	probe := floetest.NewHeapProbe(b, "heap")
	for b.Loop() {
		tbl := openTestTable(b, tempCatalog(b), "lake.live", snapshot.OpenOptions{Create: true})
		var early float64
		for i := range commits {
			rs := make([]mapping.Range, 4)
			for p := range rs {
				rs[p] = mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: int32(p)}, Interval: mapping.Interval{Low: int64(5 * i), High: int64(5*i + 5)}}
			}
			if _, err := tbl.Commit(b.Context(), snapshot.Flush{Ranges: rs}, snapshot.CommitOptions{Writer: "bench"}); err != nil {
				b.Fatal(err)
			}
			if _, _, err := tbl.AutoMaintain(b.Context(), floetest.QuietLogger()); err != nil {
				b.Fatal(err)
			}
			if i+1 == commits/10 {
				early = probe.LiveMiB(i + 1)
			}
		}
		floetest.ReportGrowth(b, early, probe.LiveMiB(commits), commits)
	}
}
