package snapshot_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/internal/memprobe"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkCompact measures a compaction of a table that a sink filled in
// many small flushes: 200 commits of 500 records of ~200 bytes to each of
// two partitions (400 files, 200,000 rows), compacted at the default
// target file size. It reports the files before and after and the rows
// rewritten per second (the commits that fill the table are not timed),
// beside the rows per second of a plain scan of the small files (the
// baseline: compaction reads them all and writes them again) and the rows
// per CPU-second the compaction used, and the peak of the live Go heap
// (as of each garbage collection, sampled every 5 ms) during it: the memory
// a sink's scheduled compaction adds to the sink. The process's heap also
// holds the batches the filling commits built (their builders are released
// when the benchmark ends), so the peak over the heap before the
// compaction (compaction_heap_MiB) says more than the peak itself; a heap
// profile at that peak showed the compaction's own objects at 20-30 MB.
// FLOE_BENCH_COMPACT_PROPS
// sets table properties first (k=v,...), to compare writer settings,
// FLOE_BENCH_COMPACT_COMMITS the commits (200), and FLOE_BENCH_COMPACT_TIER
// compacts them first and commits as many again, so that the compaction
// measured merges an earlier output again (a tier merge).
//
//	go test -run '^$' -bench BenchmarkCompact -benchtime 1x ./snapshot/
func BenchmarkCompact(b *testing.B) {
	const rows = 500
	commits := 200
	if n, err := strconv.Atoi(os.Getenv("FLOE_BENCH_COMPACT_COMMITS")); err == nil {
		commits = n
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var (
		res       snapshot.CompactResult
		read, cpu time.Duration
		peak      uint64
		base      uint64
	)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tbl := openTestTable(b, tempCatalog(b), "lake.bench", snapshot.OpenOptions{Create: true})
		if props := os.Getenv("FLOE_BENCH_COMPACT_PROPS"); props != "" {
			set := iceberg.Properties{}
			for kv := range strings.SplitSeq(props, ",") {
				k, v, _ := strings.Cut(kv, "=")
				set[k] = v
			}
			if err := tbl.SetProperties(b.Context(), set); err != nil {
				b.Fatal(err)
			}
		}
		fill := func(from int) {
			for c := from; c < from+commits; c++ {
				lo := int64(c * rows)
				recs := make([]testRec, 0, 2*rows)
				for p := range int32(2) {
					for o := lo; o < lo+rows; o++ {
						// Half random, half repeated: Kafka payloads compress.
						recs = append(recs, testRec{partition: p, offset: o, key: fmt.Sprint(o % 97), value: fmt.Sprintf("%048x%s", rng.Uint64(), strings.Repeat("ab", 70))})
					}
				}
				commitRecs(b, tbl, map[int32]mapping.Interval{0: {Low: lo, High: lo + rows}, 1: {Low: lo, High: lo + rows}}, recs...)
			}
		}
		fill(0)
		if os.Getenv("FLOE_BENCH_COMPACT_TIER") != "" {
			// An earlier compaction's output, then as many rows again in
			// small files: the compaction measured merges it again.
			if _, err := tbl.Compact(b.Context(), snapshot.CompactOptions{}); err != nil {
				b.Fatal(err)
			}
			fill(commits)
		}
		// The baseline: reading every row of the small files once.
		start := time.Now()
		if err := tbl.Rows(b.Context(), 0, nil, func(arrow.RecordBatch) error { return nil }); err != nil {
			b.Fatal(err)
		}
		read = time.Since(start)
		b.StartTimer()
		before := cpuTime(b)
		runtime.GC()
		var err error
		peak, base = memprobe.Peak(func() { res, err = tbl.Compact(b.Context(), snapshot.CompactOptions{}) })
		if err != nil {
			b.Fatal(err)
		}
		cpu = cpuTime(b) - before
	}
	b.ReportMetric(float64(res.Rows)/read.Seconds(), "scan_rows/s")
	b.ReportMetric(float64(res.FilesBefore), "files_before")
	b.ReportMetric(float64(res.FilesAfter), "files_after")
	b.ReportMetric(float64(res.Rows)/res.Duration.Seconds(), "rows/s")
	// CPU time too: on a shared machine the wall time says more about the
	// neighbours than about the compaction.
	b.ReportMetric(float64(res.Rows)/cpu.Seconds(), "rows/cpu-s")
	b.ReportMetric(float64(res.BytesBefore)/(1<<20), "MiB_before")
	b.ReportMetric(float64(res.BytesAfter)/(1<<20), "MiB_after")
	b.ReportMetric(float64(peak)/(1<<20), "peak_heap_MiB")
	b.ReportMetric(float64(peak-base)/(1<<20), "compaction_heap_MiB")
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
