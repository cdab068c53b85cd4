package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkSoak runs one floe sink, as its own process with its default
// settings but small flushes, for FLOE_SOAK_COMMITS commits (100,000 by
// default) of a FLOE_SOAK_PARTITIONS-partition topic (200) on a kfake
// broker in this process, and checks that nothing grows with the table's
// age. A producer writes the next FLOE_SOAK_FLUSH records (20, the sink's
// --flush-records) as each commit lands, one record a partition in turn,
// so that every commit covers that many partitions and all of them are
// covered every partitions/flush commits.
//
// Every FLOE_SOAK_EVERY commits (1,000; at most FLOE_SOAK_COMMITS) it records the sink's resident
// set (VmRSS), the median commit latency of those commits (the "commit"
// of the sink's committed log line: the catalog commit), the size of the
// table's metadata.json, its live data files and snapshots, and the size
// of its ledger archive (the floe-ledger folder), and since the last
// sample the commits a second and the sink's CPU time (user and system)
// per commit, and from the sink's own metrics (--metrics-addr) the Go
// heap's goal (the heap size at which the next collection starts, about
// twice the heap live after the last one) and the heap the runtime holds
// idle without having returned it to the system: together they tell live
// memory from memory RSS still counts after a spike. FLOE_SOAK_OUT=FILE.csv
// writes those lines as they are taken; `go run ./internal/benchplot`
// draws them. FLOE_SOAK_ARGS adds flags to floe sink (space-separated,
// e.g. --compact-interval=0 for a run without compaction), FLOE_BENCH_FLOE
// names the floe binary (default: built from this checkout) and
// FLOE_SOAK_LOG a file to copy the sink's log to. The paths must be
// absolute (go test runs in cmd/floe/), and are checked first.
//
//	FLOE_SOAK_COMMITS=5000 FLOE_SOAK_OUT=$PWD/soak.csv go test ./cmd/floe/ -run '^$' -bench Soak -benchtime 1x -timeout 24h
func BenchmarkSoak(b *testing.B) {
	commits := benchEnvInt(b, "FLOE_SOAK_COMMITS", 100_000)
	// A few partitions are the shape of a live sink on a small topic.
	partitions := benchEnvIntFrom(b, "FLOE_SOAK_PARTITIONS", 200, 1)
	every := benchEnvInt(b, "FLOE_SOAK_EVERY", 1_000)
	if every > commits {
		// No sample would be taken: every metric would read 0 or NaN.
		b.Fatalf("FLOE_SOAK_COMMITS=%d is fewer than FLOE_SOAK_EVERY=%d (the commits between samples): set FLOE_SOAK_EVERY to at most %d", commits, every, commits)
	}
	flush := benchEnvIntFrom(b, "FLOE_SOAK_FLUSH", 20, 1)
	// The paths before the binary's build and the broker: a relative
	// path would land in cmd/floe/ (go test's folder), where the plot
	// command run from the repository's root does not look.
	outPath := floetest.BenchPath(b, "FLOE_SOAK_OUT", floetest.BenchOutFile)
	logPath := floetest.BenchPath(b, "FLOE_SOAK_LOG", floetest.BenchOutFile)
	bin := benchFloe(b)
	var out *csv.Writer
	if path := outPath; path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		out = csv.NewWriter(f)
		defer out.Flush()
		if err := out.Write(soakColumns); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		var first, last soakSample
		soak(b, bin, logPath, commits, partitions, every, flush, func(s soakSample) {
			if first.commit == 0 {
				first = s
			}
			last = s
			b.Logf("%+v", s)
			if out != nil {
				if err := out.Write(s.row()); err != nil {
					b.Fatal(err)
				}
				out.Flush()
			}
		})
		b.ReportMetric(last.commitMs/first.commitMs, "last/first-commit-ms")
		b.ReportMetric(last.rssMiB/first.rssMiB, "last/first-rss")
		b.ReportMetric(last.rssMiB, "last-rss-MiB")
		b.ReportMetric(float64(last.liveFiles), "last-live-files")
		b.ReportMetric(float64(last.metadataBytes)/1e3, "last-metadata.json-KB")
		b.ReportMetric(float64(last.archiveBytes)/1e6, "last-archive-MB")
	}
}

var soakColumns = []string{"commit", "rss_mib", "commit_ms", "metadata_bytes", "live_files", "snapshots", "archive_bytes", "commits_per_s", "cpu_ms_per_commit",
	"heap_goal_mib", "heap_idle_mib"}

// soakSample is what BenchmarkSoak records every FLOE_SOAK_EVERY commits.
type soakSample struct {
	commit         int
	rssMiB         float64
	commitMs       float64 // median over the commits since the last sample
	metadataBytes  int64
	liveFiles      int
	snapshots      int
	archiveBytes   int64
	commitsPerS    float64 // since the last sample
	cpuMsPerCommit float64
	heapGoalMiB    float64 // go_memstats_next_gc_bytes
	heapIdleMiB    float64 // go_memstats_heap_idle_bytes less go_memstats_heap_released_bytes
}

func (s soakSample) row() []string {
	return []string{strconv.Itoa(s.commit), strconv.FormatFloat(s.rssMiB, 'f', 1, 64), strconv.FormatFloat(s.commitMs, 'f', 2, 64),
		strconv.FormatInt(s.metadataBytes, 10), strconv.Itoa(s.liveFiles), strconv.Itoa(s.snapshots), strconv.FormatInt(s.archiveBytes, 10),
		strconv.FormatFloat(s.commitsPerS, 'f', 1, 64), strconv.FormatFloat(s.cpuMsPerCommit, 'f', 2, 64),
		strconv.FormatFloat(s.heapGoalMiB, 'f', 1, 64), strconv.FormatFloat(s.heapIdleMiB, 'f', 1, 64)}
}

// soak runs the sink for commits commits and calls record every every
// commits; with logPath set it copies the sink's log there.
func soak(b *testing.B, bin, logPath string, commits, partitions, every, flush int, record func(soakSample)) {
	ctx := b.Context()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), "soak"))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	produced := 0
	produce := func() {
		recs := make([]*kgo.Record, flush)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "soak", Partition: int32(produced % partitions),
				Key: fmt.Appendf(nil, "key-%08d", produced), Value: fmt.Appendf(nil, `{"n":%d,"pad":"%0100d"}`, produced, 0)}
			produced++
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}

	dir := b.TempDir()
	catPath, warehouse := filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")
	args := []string{"sink", "--log-format", "json", "--brokers", strings.Join(brokers, ","), "--topic", "soak",
		"--catalog", catPath, "--warehouse", warehouse, "--table", "bench.soak", "--flush-records", strconv.Itoa(flush)}
	metricsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freeTCPPort(b)))
	args = append(args, "--metrics-addr", metricsAddr)
	args = append(args, strings.Fields(os.Getenv("FLOE_SOAK_ARGS"))...)
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	produce()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()

	var cat icecat.Catalog
	var log io.Reader = stderr
	if logPath != "" {
		f, err := os.Create(logPath)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		log = io.TeeReader(stderr, f)
	}
	lines := bufio.NewScanner(log)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	var window []float64
	n := 0
	lastAt, lastCPU := time.Now(), time.Duration(0)
	for n < commits && lines.Scan() {
		var l struct {
			Msg    string `json:"msg"`
			Level  string `json:"level"`
			Rows   int64  `json:"rows"`
			Commit string `json:"commit"` // a duration, rounded to the millisecond
		}
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil {
			continue
		}
		if l.Level == "ERROR" {
			b.Fatalf("floe sink: %s", lines.Text())
		}
		if l.Msg != "committed" || l.Rows == 0 {
			continue
		}
		d, err := time.ParseDuration(l.Commit)
		if err != nil {
			b.Fatalf("floe sink's committed line: commit %q: %v", l.Commit, err)
		}
		n++
		window = append(window, float64(d.Microseconds())/1e3)
		if n%every == 0 {
			if cat == nil {
				if cat, err = catalog.Open(ctx, catalog.Config{Catalog: catPath, Warehouse: warehouse}); err != nil {
					b.Fatal(err)
				}
			}
			s := soakSample{commit: n, rssMiB: vmRSS(b, cmd.Process.Pid)}
			m := goMemstats(b, metricsAddr)
			s.heapGoalMiB = m["next_gc_bytes"] / (1 << 20)
			s.heapIdleMiB = (m["heap_idle_bytes"] - m["heap_released_bytes"]) / (1 << 20)
			now, cpu := time.Now(), procCPU(b, cmd.Process.Pid)
			s.commitsPerS = float64(every) / now.Sub(lastAt).Seconds()
			s.cpuMsPerCommit = float64((cpu - lastCPU).Microseconds()) / 1e3 / float64(every)
			lastAt, lastCPU = now, cpu
			slices.Sort(window)
			s.commitMs, window = window[len(window)/2], window[:0]
			tbl, err := snapshot.Open(ctx, cat, []string{"bench", "soak"}, snapshot.OpenOptions{})
			if err != nil {
				b.Fatal(err)
			}
			files, err := tbl.Files(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			s.liveFiles, s.snapshots = len(files), len(tbl.Iceberg().Metadata().Snapshots())
			meta := strings.TrimPrefix(tbl.Iceberg().MetadataLocation(), "file://")
			if fi, err := os.Stat(meta); err == nil {
				s.metadataBytes = fi.Size()
			}
			s.archiveBytes = dirSize(b, filepath.Join(filepath.Dir(meta), "floe-ledger"))
			record(s)
		}
		produce()
	}
	if err := lines.Err(); err != nil {
		b.Fatal(err)
	}
	if n < commits {
		b.Fatalf("floe sink ended after %d commits of %d", n, commits)
	}
}

// procCPU is the CPU time (user and system) process pid has used, from
// /proc/PID/stat in clock ticks of 10 ms (Linux's USER_HZ).
func procCPU(b *testing.B, pid int) time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command, which is in parentheses: state is the
	// 3rd field of the line, utime the 14th, stime the 15th.
	_, rest, ok := strings.Cut(string(st), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, st)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// goMemstats returns the go_memstats_ gauges (without the prefix) the
// metrics endpoint at addr serves.
func goMemstats(b *testing.B, addr string) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		name, value, ok := strings.Cut(lines.Text(), " ")
		if name, found := strings.CutPrefix(name, "go_memstats_"); ok && found {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				m[name] = v
			}
		}
	}
	if err := lines.Err(); err != nil {
		b.Fatal(err)
	}
	if _, ok := m["next_gc_bytes"]; !ok {
		b.Fatalf("%s/metrics serves no go_memstats_next_gc_bytes", addr)
	}
	return m
}

// vmRSS is the resident set of process pid in MiB.
func vmRSS(b *testing.B, pid int) float64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.Lines(string(st)) {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// dirSize is the bytes of the files under dir (0 when it is missing).
func dirSize(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		b.Fatal(err)
	}
	return n
}
