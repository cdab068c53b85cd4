package floetest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BrokerChildEnv makes a test binary whose TestMain calls BrokerChild run
// a kfake broker alone (StartBrokerProcess).
const BrokerChildEnv = "FLOE_TEST_BROKER_CHILD"

// StartBrokerProcess runs a kfake broker in a process of its own (this
// test binary, re-executed: its TestMain must call BrokerChild when
// BrokerChildEnv is set) and returns its address; it stops with the test.
// An in-process broker shares the test's cores and heap with the client it
// serves, which favours a plain consumer over a sink that uses both cores.
func StartBrokerProcess(t testing.TB) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), BrokerChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("broker process: %v", err)
	}
	return strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "brokers ")), ",")
}

// BrokerChild serves a kfake broker until its standard input closes, and
// returns the process's exit code.
func BrokerChild() int {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer c.Close()
	fmt.Printf("brokers %s\n", strings.Join(c.ListenAddrs(), ","))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// BenchRecords is FLOE_BENCH_RECORDS, the number of records a benchmark
// sinks, 1,000,000 by default.
func BenchRecords(t testing.TB) int {
	s := os.Getenv("FLOE_BENCH_RECORDS")
	if s == "" {
		return 1_000_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("FLOE_BENCH_RECORDS=%q: want a positive count", s)
	}
	return n
}

// ProduceBench creates topic with 4 partitions and produces n records of
// about 200 bytes round-robin: a 14-byte key, a 160-byte value and one
// header, timestamps a millisecond apart. The throughput benchmarks sink
// these.
func (e *Env) ProduceBench(topic string, n int) { e.ProduceBenchOver(topic, n, 4) }

// ProduceBenchOver is ProduceBench over a topic of the given number of
// partitions, the records spread round-robin.
func (e *Env) ProduceBenchOver(topic string, n int, partitions int32) {
	e.Topic(topic, partitions, nil)
	value := make([]byte, 160)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	batch := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(i % int(partitions)),
			Key:       fmt.Appendf(nil, "key-%08d", i),
			Value:     value,
			Headers:   []kgo.RecordHeader{{Key: "src", Value: []byte("bench")}},
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
		if len(batch) == cap(batch) || i == n-1 {
			e.Produce(batch)
			batch = batch[:0]
		}
	}
}

// BenchPartitions is FLOE_BENCH_PARTITIONS, the partitions of the topic
// a benchmark produces, 4 by default, at most maxBenchPartitions.
func BenchPartitions(t testing.TB) int32 {
	t.Helper()
	n, err := benchPartitions(os.Getenv("FLOE_BENCH_PARTITIONS"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// maxBenchPartitions bounds FLOE_BENCH_PARTITIONS: the kfake broker in
// the benchmark's process keeps every partition, and far above a real
// topic's partition count the figures say nothing of floe.
const maxBenchPartitions = 100_000

func benchPartitions(s string) (int32, error) {
	if s == "" {
		return 4, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxBenchPartitions {
		return 0, fmt.Errorf("FLOE_BENCH_PARTITIONS=%q: want a whole number of partitions from 1 to %d", s, maxBenchPartitions)
	}
	return int32(n), nil
}

// BenchCommits is FLOE_BENCH_COMMITS, the number of commits a benchmark
// makes, def by default.
func BenchCommits(t testing.TB, def int) int {
	s := os.Getenv("FLOE_BENCH_COMMITS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 {
		t.Fatalf("FLOE_BENCH_COMMITS=%q: want an integer of at least 100", s)
	}
	return n
}

// BenchPathKind is what a benchmark's path variable names.
type BenchPathKind int

const (
	// BenchProgram is a program the benchmark runs (a floe build): an
	// executable file that exists.
	BenchProgram BenchPathKind = iota
	// BenchOutFile is a file the benchmark writes: its folder exists.
	BenchOutFile
	// BenchOutFolder is a folder the benchmark writes into: it exists.
	BenchOutFolder
	// BenchCacheFolder is a folder the benchmark creates if missing and
	// keeps between runs: its parent folder exists.
	BenchCacheFolder
)

// BenchPath is the path the environment variable name gives a benchmark,
// "" when it is unset, checked at once: a benchmark calls it before any
// work, so that a wrong path fails in a second rather than after minutes
// of producing records or running another build.
func BenchPath(t testing.TB, name string, kind BenchPathKind) string {
	t.Helper()
	value := os.Getenv(name)
	if err := CheckBenchPath(name, value, kind); err != nil {
		t.Fatal(err)
	}
	return value
}

// CheckBenchPath is BenchPath's check of value, the value of the
// environment variable name (nil when it is empty). A relative path is
// refused rather than resolved: go test runs a benchmark in its package's
// folder, not where the command was typed, so neither folder is a safe
// guess of what the user meant.
func CheckBenchPath(name, value string, kind BenchPathKind) error {
	if value == "" {
		return nil
	}
	if !filepath.IsAbs(value) {
		return fmt.Errorf("%s=%s: give an absolute path (go test runs in the package folder): $PWD/%s", name, value, filepath.Clean(value))
	}
	check, what := value, ""
	switch kind {
	case BenchProgram:
		what = "a floe binary to run (build one at the commit to measure: go build -o " + value + " ./cmd/floe)"
	case BenchOutFile:
		check, what = filepath.Dir(value), "a folder to write "+filepath.Base(value)+" into (create it first)"
	case BenchOutFolder:
		what = "a folder to write into (create it first)"
	case BenchCacheFolder:
		check, what = filepath.Dir(value), "a folder to create "+filepath.Base(value)+" in (create it first)"
	}
	fi, err := os.Stat(check)
	switch {
	case err != nil && os.IsNotExist(err):
		return fmt.Errorf("%s=%s: %s does not exist; %s names %s", name, value, missing(check, value), name, what)
	case err != nil:
		return fmt.Errorf("%s=%s: %v", name, value, err)
	case kind == BenchProgram && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0):
		return fmt.Errorf("%s=%s: not an executable file; %s names %s", name, value, name, what)
	case kind != BenchProgram && !fi.IsDir():
		return fmt.Errorf("%s=%s: %s is not a folder; %s names %s", name, value, check, name, what)
	}
	return nil
}

// missing names what CheckBenchPath did not find: the path itself, or its
// folder.
func missing(check, value string) string {
	if check == value {
		return "it"
	}
	return check
}

// HeapProbe measures a process's live heap at points of a benchmark, and
// with FLOE_BENCH_HEAPPROFILE set writes a heap profile at each into that
// folder (NAME-N.pprof), sampling every allocation of 4 KiB: the default
// rate (512 KiB) misses the small ones a long history is made of.
type HeapProbe struct {
	t      testing.TB
	name   string
	folder string
}

// NewHeapProbe returns the probe of a benchmark whose profiles are named
// name.
func NewHeapProbe(t testing.TB, name string) HeapProbe {
	p := HeapProbe{t: t, name: name, folder: BenchPath(t, "FLOE_BENCH_HEAPPROFILE", BenchOutFolder)}
	if p.folder != "" {
		runtime.MemProfileRate = 4 << 10
	}
	return p
}

// LiveMiB runs a GC and returns the live heap in MiB, after commit n.
func (p HeapProbe) LiveMiB(n int) float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if p.folder != "" {
		f, err := os.Create(filepath.Join(p.folder, fmt.Sprintf("%s-%d.pprof", p.name, n)))
		if err != nil {
			p.t.Fatal(err)
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			p.t.Fatal(err)
		}
	}
	return float64(ms.HeapAlloc) / (1 << 20)
}

// ReportGrowth reports the live heap after a tenth of the commits (early)
// and at the end (late), and fails the benchmark when late is more than
// 1.25 times early: what grows with the table's history.
func ReportGrowth(b *testing.B, early, late float64, commits int) {
	b.ReportMetric(early, "heap-MiB-at-tenth")
	b.ReportMetric(late, "heap-MiB-at-end")
	b.ReportMetric(late/early, "end/tenth")
	if late > 1.25*early {
		b.Errorf("live heap %.1f MiB after %d commits, %.1f MiB after %d: it grows with the table's history", late, commits, early, commits/10)
	}
}
