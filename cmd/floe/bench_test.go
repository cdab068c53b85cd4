//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/floetest"
)

// BenchmarkSinkProcess is what a user sees of floe's throughput: it
// produces FLOE_BENCH_RECORDS (default 1,000,000) records of about 200
// bytes (4 partitions) once, on a kfake broker in a process of its own,
// then runs, as separate processes in the same run, a plain franz-go
// consumer of the topic (internal/plainconsume, the baseline, fetching as
// the sink does) and
// 'floe sink --stop-at-end' (the floe binary, built for the benchmark,
// with the zero-setup SQLite catalog and file warehouse and the default
// flush settings), both timed from start to exit:
//
//	go test ./cmd/floe/ -run '^$' -bench SinkProcess -benchtime 3x
//
// It reports sink/consume, the ratio of the two processes' wall times;
// core/consume, the sink's rate from its "sink session started" log line
// to its exit (consuming, encoding and committing, without the process's
// start and the opening of the table) against the baseline's own reading
// time; sink_start_ms, the time before that line; and sink_peak_rss_MiB,
// the sink's peak resident set (VmHWM, read from /proc while it runs),
// failing above 300 MiB; and both processes' CPU time per million records
// and the cores the sink kept busy. FLOE_BENCH_FLOE=PATH runs that floe
// binary instead of building one (to compare builds in one run; an
// absolute path, checked before the records are produced), and
// FLOE_BENCH_PARTITIONS=N spreads the records over N partitions instead
// of 4 (a wide topic: the ceiling holds there too).
func BenchmarkSinkProcess(b *testing.B) {
	n := floetest.BenchRecords(b)
	floe := floetest.BenchPath(b, "FLOE_BENCH_FLOE", floetest.BenchProgram)
	e := floetest.New(b)
	e.Stack.Brokers = floetest.StartBrokerProcess(b)
	const topic = "bench"
	e.ProduceBenchOver(topic, n, floetest.BenchPartitions(b))
	var ends []string
	for tp, end := range e.HighWatermarks(topic) {
		ends = append(ends, fmt.Sprintf("%d:%d", tp.Partition, end))
	}
	bin := b.TempDir()
	builds := [][]string{{"-o", filepath.Join(bin, "plainconsume"), "../../internal/plainconsume/cmd/plainconsume"}}
	if floe == "" {
		floe = filepath.Join(bin, "floe")
		builds = append(builds, []string{"-o", floe, "."})
	}
	for _, build := range builds {
		if out, err := exec.Command("go", append([]string{"build"}, build...)...).CombinedOutput(); err != nil {
			b.Fatalf("go build %s: %v\n%s", build[len(build)-1], err, out)
		}
	}
	brokers := strings.Join(e.Stack.Brokers, ",")
	b.ResetTimer()
	var consumeSec, consumeCoreSec, consumeCPU, sinkSec, sinkCoreSec, sinkCPU, peakMiB float64
	for i := range b.N {
		consume := exec.Command(filepath.Join(bin, "plainconsume"), "-brokers", brokers, "-topic", topic, "-ends", strings.Join(ends, ","))
		run := runProcess(b, consume, "")
		var got int
		var core float64
		if _, err := fmt.Sscanf(run.stdout, "consumed %d in %f s", &got, &core); err != nil || got != n {
			b.Fatalf("plainconsume: %q (%v), want %d records", run.stdout, err, n)
		}
		consumeSec += run.wall.Seconds()
		consumeCoreSec += core
		consumeCPU += run.cpu.Seconds()

		sink := exec.Command(floe, "sink", "--brokers", brokers, "--topic", topic,
			"--table", fmt.Sprintf("bench.t%d", i), "--stop-at-end")
		sink.Dir = b.TempDir()
		run = runProcess(b, sink, "sink session started")
		if !strings.Contains(run.stdout, fmt.Sprintf("%d rows", n)) {
			b.Fatalf("floe sink: %q, want %d rows\n%s", run.stdout, n, run.stderr)
		}
		if run.marked == 0 {
			b.Fatalf("floe sink logged no 'sink session started':\n%s", run.stderr)
		}
		sinkSec += run.wall.Seconds()
		sinkCoreSec += (run.wall - run.marked).Seconds()
		sinkCPU += run.cpu.Seconds()
		peakMiB = max(peakMiB, run.peakKiB/1024)
	}
	b.StopTimer()
	total := float64(n * b.N)
	b.ReportMetric(total/consumeSec, "consume_rec/s")
	b.ReportMetric(total/sinkSec, "sink_rec/s")
	b.ReportMetric(consumeSec/sinkSec, "sink/consume")
	b.ReportMetric(consumeCoreSec/sinkCoreSec, "core/consume")
	b.ReportMetric((sinkSec-sinkCoreSec)/float64(b.N)*1000, "sink_start_ms")
	b.ReportMetric(peakMiB, "sink_peak_rss_MiB")
	// CPU time (user and system) per million records, and the cores each
	// process kept busy on average (CPU time / wall time): a sink that
	// keeps every core busy is bound by its CPU time, not by waiting.
	b.ReportMetric(sinkCPU/total*1e6, "sink_cpu_s/Mrec")
	b.ReportMetric(consumeCPU/total*1e6, "consume_cpu_s/Mrec")
	b.ReportMetric(sinkCPU/sinkSec, "sink_cores")
	if peakMiB > benchRSSCeilingMiB {
		b.Errorf("floe sink's peak resident set is %.0f MiB, above the %d MiB ceiling", peakMiB, benchRSSCeilingMiB)
	}
}

// benchRSSCeilingMiB is the peak resident set BenchmarkSinkProcess allows
// floe sink at the default settings.
const benchRSSCeilingMiB = 300

// processRun is what runProcess saw of a process.
type processRun struct {
	stdout, stderr string
	// wall is the time from start to exit; marked the time from start to
	// the first standard-error line holding the mark (zero: none).
	wall, marked time.Duration
	// cpu is the process's user and system time.
	cpu     time.Duration
	peakKiB float64
}

// runProcess runs cmd to its end, failing the benchmark when it fails,
// and reads its peak resident set from /proc while it runs (VmHWM only
// grows: the last reading is at most one poll short of the peak).
func runProcess(b *testing.B, cmd *exec.Cmd, mark string) processRun {
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var (
		run  processRun
		errs strings.Builder
		read sync.WaitGroup
	)
	read.Go(func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if mark != "" && run.marked == 0 && strings.Contains(sc.Text(), mark) {
				run.marked = time.Since(start)
			}
			errs.WriteString(sc.Text() + "\n")
		}
	})
	stop := make(chan struct{})
	var poll sync.WaitGroup
	poll.Go(func() {
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if kib, ok := vmHWM(status); ok {
				run.peakKiB = kib
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	})
	read.Wait()
	err = cmd.Wait()
	run.wall = time.Since(start)
	close(stop)
	poll.Wait()
	run.stdout, run.stderr = stdout.String(), errs.String()
	run.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if err != nil {
		b.Fatalf("%s: %v\n%s\n%s", strings.Join(cmd.Args, " "), err, run.stdout, run.stderr)
	}
	return run
}

// vmHWM reads the peak resident set in KiB from a /proc/PID/status file.
func vmHWM(status string) (float64, bool) {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0, false
	}
	for l := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kib, err == nil
		}
	}
	return 0, false
}
