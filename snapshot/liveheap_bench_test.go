package snapshot_test

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
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
// tenth's: what a writer holds must not grow with the table's history
// (issue 23: a sink's heap grew 12 -> 21 MB over 3,000 commits while the
// archive grew). FLOE_BENCH_COMMITS sets the commits (3,000), of one
// range on each of 4 partitions; FLOE_BENCH_HEAPPROFILE names a folder to
// write heap profiles into (heap-N.pprof at both points).
//
//	go test ./snapshot/ -run '^$' -bench LiveHeap -benchtime 1x
func BenchmarkLiveHeap(b *testing.B) {
	commits := 3000
	if s := os.Getenv("FLOE_BENCH_COMMITS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 {
			b.Fatalf("FLOE_BENCH_COMMITS=%q: want an integer of at least 100", s)
		}
		commits = n
	}
	profiles := os.Getenv("FLOE_BENCH_HEAPPROFILE")
	if profiles != "" {
		// Every allocation of 4 KiB sampled: the default (512 KiB) misses
		// the small ones a long history is made of.
		runtime.MemProfileRate = 4 << 10
	}
	for b.Loop() {
		tbl := openTestTable(b, tempCatalog(b), "lake.live", snapshot.OpenOptions{Create: true})
		live := func(n int) float64 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if profiles != "" {
				f, err := os.Create(filepath.Join(profiles, "heap-"+strconv.Itoa(n)+".pprof"))
				if err != nil {
					b.Fatal(err)
				}
				if err := pprof.WriteHeapProfile(f); err != nil {
					b.Fatal(err)
				}
				f.Close()
			}
			return float64(ms.HeapAlloc) / (1 << 20)
		}
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
				early = live(i + 1)
			}
		}
		late := live(commits)
		b.ReportMetric(early, "heap-MiB-at-tenth")
		b.ReportMetric(late, "heap-MiB-at-end")
		b.ReportMetric(late/early, "end/tenth")
		if late > 1.25*early {
			b.Errorf("live heap %.1f MiB after %d commits, %.1f MiB after %d: it grows with the table's history", late, commits, early, commits/10)
		}
	}
}
