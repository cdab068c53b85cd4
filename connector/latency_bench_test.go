package connector_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkCommitLatency commits FLOE_BENCH_COMMITS (default 10,000) flushes
// of 10 records each into one table, with the default settings but
// --flush-records 10, and records every commit's latency (the catalog
// commit, snapshot.Result.CommitTime), the size of the metadata.json it
// wrote and the table's live snapshots. Two ways of running a sink:
//
//   - mode=live: one sink runs throughout; a producer writes the next 10
//     records as each commit lands, so that every flush holds 10 records.
//   - mode=bounded: a cron job of --stop-at-end runs, each a new sink on a
//     table opened afresh (as a new process would), sinking the 10
//     records produced before it.
//
// Every 10th commit is followed by the same sink's commit of 10 records
// into a fresh table (no history): the baseline measured in the same run.
// Commit latencies swing with the machine's load, which a long run sees
// change; the ratio of each window's median to the fresh tables' median in
// that window does not, and its last / first ("vs-fresh") is the figure
// that says whether history slows commits.
//
// FLOE_BENCH_MAINTAIN=off runs the sinks with --maintain=false (floe before
// in-sink maintenance). FLOE_BENCH_OUT=FILE.csv writes one line per commit
// as it lands (mode, maintain, commit, commit_ms, metadata_bytes,
// snapshots, fresh_ms: the fresh table's commit after it, when sampled), which
// `go run ./internal/benchplot` draws. It reports the median latency of the
// first and of the last 1,000 commits (or tenth, for fewer commits), the
// last metadata.json's size and the metadata folder's.
//
//	FLOE_BENCH_OUT=/tmp/latency.csv go test ./connector/ -run '^$' -bench CommitLatency -benchtime 1x -timeout 3h
func BenchmarkCommitLatency(b *testing.B) {
	outPath := floetest.BenchPath(b, "FLOE_BENCH_OUT", floetest.BenchOutFile)
	n := 10_000
	if s := os.Getenv("FLOE_BENCH_COMMITS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 10 {
			b.Fatalf("FLOE_BENCH_COMMITS=%q: want a number of at least 10", s)
		}
	}
	maintain := os.Getenv("FLOE_BENCH_MAINTAIN") != "off"
	var out *csv.Writer
	if outPath != "" {
		f, err := os.Create(outPath)
		if err != nil {
			b.Fatal(err)
		}
		defer func() {
			out.Flush()
			if err := f.Close(); err != nil {
				b.Error(err)
			}
		}()
		out = csv.NewWriter(f)
		if err := out.Write([]string{"mode", "maintain", "commit", "commit_ms", "metadata_bytes", "snapshots", "fresh_ms"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{"live", "bounded"} {
		b.Run("mode="+mode, func(b *testing.B) {
			for range b.N {
				// Each commit's line is written as it lands, so that a run
				// stopped early leaves what it measured.
				record := func(i int, c commitSample) {
					if out == nil {
						return
					}
					fresh := ""
					if c.fresh > 0 {
						fresh = strconv.FormatFloat(c.fresh, 'f', 3, 64)
					}
					if err := out.Write([]string{mode, strconv.FormatBool(maintain), strconv.Itoa(i),
						strconv.FormatFloat(c.ms, 'f', 3, 64), strconv.FormatInt(c.metadata, 10), strconv.Itoa(c.snapshots), fresh}); err != nil {
						b.Error(err)
					}
					if i%100 == 0 {
						out.Flush()
					}
				}
				lat := benchCommits(b, mode, n, maintain, record)
				if out != nil {
					out.Flush()
				}
				first, last := lat.medians()
				freshFirst, freshLast := lat.freshMedians()
				b.ReportMetric(first, "first-ms")
				b.ReportMetric(last, "last-ms")
				b.ReportMetric(last/first, "last/first")
				b.ReportMetric((last/freshLast)/(first/freshFirst), "last/first-vs-fresh")
				b.ReportMetric(float64(lat.commits[len(lat.commits)-1].metadata)/1e6, "metadata.json-MB")
				b.ReportMetric(float64(lat.folder)/1e6, "metadata-folder-MB")
				b.Logf("%s, maintain=%v: %d commits, median commit %.1f ms over the first %d, %.1f ms over the last (a fresh table's: %.1f and %.1f ms); metadata.json %d bytes, metadata folder %d bytes, %d snapshots",
					mode, maintain, len(lat.commits), first, lat.window(), last, freshFirst, freshLast, lat.commits[len(lat.commits)-1].metadata, lat.folder, lat.commits[len(lat.commits)-1].snapshots)
			}
		})
	}
}

// commitSample is one commit of the benchmark.
type commitSample struct {
	ms        float64
	metadata  int64
	snapshots int
	fresh     float64 // a fresh table's commit right after it, ms; 0 when not sampled
}

type latencies struct {
	commits []commitSample
	folder  int64 // bytes under the metadata folder at the end
}

// window is the number of commits each median covers: 1,000, or a tenth
// of fewer commits.
func (l latencies) window() int { return min(1000, len(l.commits)/10) }

func (l latencies) medians() (first, last float64) {
	med := func(cs []commitSample) float64 {
		ms := make([]float64, len(cs))
		for i, c := range cs {
			ms[i] = c.ms
		}
		slices.Sort(ms)
		return ms[len(ms)/2]
	}
	w := l.window()
	return med(l.commits[:w]), med(l.commits[len(l.commits)-w:])
}

// freshMedians returns the median latency of the fresh tables' commits
// sampled in the first and in the last window.
func (l latencies) freshMedians() (first, last float64) {
	med := func(cs []commitSample) float64 {
		var ms []float64
		for _, c := range cs {
			if c.fresh > 0 {
				ms = append(ms, c.fresh)
			}
		}
		if len(ms) == 0 {
			return math.NaN()
		}
		slices.Sort(ms)
		return ms[len(ms)/2]
	}
	w := l.window()
	return med(l.commits[:w]), med(l.commits[len(l.commits)-w:])
}

func benchCommits(b *testing.B, mode string, n int, maintain bool, record func(int, commitSample)) latencies {
	e := newEnv(b)
	const topic = "latency"
	e.Topic(topic, 1, nil)
	name := "bench.latency"
	tbl := e.Table(name)
	var lat latencies
	// fresh commits 10 records into a new table with the sink's settings and
	// returns that commit's latency in ms.
	const freshTopic = "fresh"
	e.Topic(freshTopic, 1, nil)
	var freshTables int
	var freshNext int64
	fresh := func() float64 {
		recs := make([]*kgo.Record, 10)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: freshTopic, Key: fmt.Appendf(nil, "key-%08d", i), Value: fmt.Appendf(nil, "value-%08d-%0120d", i, 0)}
		}
		e.Produce(recs)
		freshTables++
		ident, err := catalog.ParseIdent(fmt.Sprintf("bench.fresh_%05d", freshTables))
		if err != nil {
			b.Fatal(err)
		}
		ft, err := snapshot.Open(e.Ctx, tbl.Catalog(), ident, snapshot.OpenOptions{Create: true})
		if err != nil {
			b.Fatal(err)
		}
		var ms float64
		cfg := connector.Config{Topic: freshTopic, FlushRecords: 10, StopAtEnd: true, NoMaintain: !maintain, Logger: quietLogger(),
			StartOffsets: map[int32]int64{0: freshNext},
			OnCommit: func(res snapshot.Result) {
				if res.Rows > 0 {
					ms = float64(res.CommitTime.Microseconds()) / 1000
				}
			}}
		if _, err := e.Sink(e.Broker(), ft, cfg); err != nil {
			b.Fatal(err)
		}
		freshNext += int64(len(recs))
		return ms
	}
	sample := func(t *snapshot.Table, res snapshot.Result) {
		c := commitSample{ms: float64(res.CommitTime.Microseconds()) / 1000, snapshots: len(t.Iceberg().Metadata().Snapshots())}
		if fi, err := os.Stat(strings.TrimPrefix(t.Iceberg().MetadataLocation(), "file://")); err == nil {
			c.metadata = fi.Size()
		}
		if len(lat.commits) < n {
			if len(lat.commits)%10 == 0 {
				c.fresh = fresh()
			}
			lat.commits = append(lat.commits, c)
			record(len(lat.commits), c)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	produced := 0
	produce := func(ctx context.Context) error {
		recs := make([]*kgo.Record, 10)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%08d", produced), Value: fmt.Appendf(nil, "value-%08d-%0120d", produced, 0),
				Timestamp: time.UnixMilli(1_700_000_000_000 + int64(produced))}
			produced++
		}
		return cl.ProduceSync(ctx, recs...).FirstErr()
	}
	cfg := connector.Config{Topic: topic, FlushRecords: 10, NoMaintain: !maintain, Logger: quietLogger()}
	b.ResetTimer()
	switch mode {
	case "live":
		ctx, cancel := context.WithCancel(e.Ctx)
		defer cancel()
		next := make(chan struct{}, 1)
		cfg.OnCommit = func(res snapshot.Result) {
			if len(res.Commit.Ranges) == 0 || res.Rows == 0 {
				return // the run's start commit
			}
			sample(tbl, res)
			if len(lat.commits) >= n {
				cancel()
				return
			}
			next <- struct{}{}
		}
		runPaced(ctx, b, e, tbl, cfg, produce, next)
	case "bounded":
		cfg.StopAtEnd = true
		for len(lat.commits) < n {
			if err := produce(e.Ctx); err != nil {
				b.Fatal(err)
			}
			// A new process loads the table afresh (its catalog and broker
			// connections are shared here: 10,000 of each would only cost
			// file descriptors).
			run, err := snapshot.Open(e.Ctx, tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
			if err != nil {
				b.Fatal(err)
			}
			cfg.OnCommit = func(res snapshot.Result) {
				if res.Rows > 0 {
					sample(run, res)
				}
			}
			if _, err := e.Sink(e.Broker(), run, cfg); err != nil {
				b.Fatal(err)
			}
		}
		if err := tbl.Refresh(e.Ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	dir := strings.TrimPrefix(tbl.Iceberg().Location(), "file://") + "/metadata"
	if err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			lat.folder += fi.Size()
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	return lat
}

// runPaced runs a sink on tbl until ctx ends, while produce writes the
// next records at the start and each time next receives (the sink's
// OnCommit sends on it once a commit lands).
func runPaced(ctx context.Context, b *testing.B, e *env, tbl *snapshot.Table, cfg connector.Config, produce func(context.Context) error, next <-chan struct{}) {
	go func() {
		for {
			if err := produce(ctx); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-next:
			}
		}
	}()
	s, err := connector.NewSink(e.Dial(), tbl, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Run(ctx); err != nil {
		b.Fatal(err)
	}
}
