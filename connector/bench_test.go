package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/internal/plainconsume"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// BenchmarkSinkVsConsume sinks FLOE_BENCH_RECORDS (default 1,000,000)
// records of about 200 bytes from kfake into the file warehouse and, in the
// same run, consumes the same records with a plain franz-go client (the
// baseline). It reports both rates, their ratio, and the peak resident set
// and CPU time of the same sink run as its own process.
//
//	go test ./connector/ -run '^$' -bench SinkVsConsume -benchtime 1x
func BenchmarkSinkVsConsume(b *testing.B) {
	b.Run("broker=in-process", func(b *testing.B) { benchSinkVsConsume(b, newEnv(b)) })
	b.Run("broker=process", func(b *testing.B) {
		e := newEnv(b)
		e.Stack.Brokers = floetest.StartBrokerProcess(b)
		benchSinkVsConsume(b, e)
	})
}

func benchSinkVsConsume(b *testing.B, e *env) {
	profile := floetest.BenchPath(b, "FLOE_BENCH_CPUPROFILE", floetest.BenchOutFile)
	n := floetest.BenchRecords(b)
	const topic = "bench"
	e.ProduceBench(topic, n)
	ends := e.endOffsets(topic)
	b.ResetTimer()
	var consumeSec, sinkSec float64
	for i := range b.N {
		start := time.Now()
		if got := consumeAll(b, e, topic, ends); got != n {
			b.Fatalf("baseline consumed %d records, want %d", got, n)
		}
		consumeSec += time.Since(start).Seconds()

		tbl := e.Table(fmt.Sprintf("bench.t%d", i))
		// Profile the sink alone, without producing and the baseline.
		defer cpuProfile(b, profile)()
		start = time.Now()
		cfg := connector.Config{Topic: topic, StopAtEnd: true}
		if os.Getenv("FLOE_BENCH_LOG") != "" {
			cfg.Logger = slog.Default()
		}
		stats, err := e.sink(tbl, cfg)
		sinkSec += time.Since(start).Seconds()
		if err != nil {
			b.Fatal(err)
		}
		if stats.Records != int64(n) {
			b.Fatalf("sink committed %d rows, want %d", stats.Records, n)
		}
	}
	total := float64(n * b.N)
	b.ReportMetric(total/consumeSec, "consume_rec/s")
	b.ReportMetric(total/sinkSec, "sink_rec/s")
	b.ReportMetric(consumeSec/sinkSec, "sink/consume")

	// Memory is measured on a sink in its own process (the in-process broker
	// would dominate this one): its peak resident set.
	b.StopTimer()
	// Rows stream into files as they are consumed: the peak is the same
	// whatever the flush size, and under the ceiling.
	for _, flush := range []int{connector.DefaultFlushRecords, connector.DefaultFlushRecords / 5} {
		metric := "sink_maxrss_MiB"
		if flush != connector.DefaultFlushRecords {
			metric = fmt.Sprintf("sink_maxrss_flush%dk_MiB", flush/1000)
		}
		cmd := e.childCmd(topic, fmt.Sprintf("bench.rss%d", flush), flush, true)
		if rss := reportPeakRSS(b, cmd, metric); rss > benchRSSCeilingMiB {
			b.Errorf("the sink's peak resident set with --flush-records %d is %.0f MiB, above the %d MiB ceiling", flush, rss, benchRSSCeilingMiB)
		}
		if flush == connector.DefaultFlushRecords {
			// The sink's own CPU time, which a busy machine disturbs less
			// than the rates: what it costs, whatever it waited for.
			b.ReportMetric(cpuSeconds(b, cmd)/float64(n)*1e6, "sink_cpu_s/Mrec")
		}
	}
}

// benchRSSCeilingMiB is the peak resident set BenchmarkSinkVsConsume
// allows a sink process at the default settings.
const benchRSSCeilingMiB = 300

// reportPeakRSS runs a sink process (childCmd) and reports its peak
// resident set in MiB, which the process prints as it exits (Linux only).
func reportPeakRSS(b *testing.B, cmd *exec.Cmd, metric string) float64 {
	mib, ok := peakRSS(b, cmd)
	if ok {
		b.ReportMetric(mib, metric)
	}
	return mib
}

// peakRSS runs cmd, a sink child process (childCmd), to its end and
// returns the peak resident set it printed, in MiB; ok is false when it
// printed none (no /proc: not Linux).
func peakRSS(t testing.TB, cmd *exec.Cmd) (mib float64, ok bool) {
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sink process: %v\n%s", err, out)
	}
	for l := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "peak_rss "); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64)
			if err != nil {
				t.Fatalf("sink process: peak resident set %q: %v", v, err)
			}
			return kib / 1024, true
		}
	}
	return 0, false
}

// consumeAll reads every partition to its end offset with a plain franz-go
// consumer, as the baseline a sink cannot beat (plainconsume.All).
func consumeAll(b *testing.B, e *env, topic string, ends map[mapping.TopicPartition]int64) int {
	byPartition := map[int32]int64{}
	for tp, end := range ends {
		byPartition[tp.Partition] = end
	}
	n, err := plainconsume.All(context.Background(), e.Stack.Brokers, topic, byPartition)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// benchOrderSchema is the Avro schema of BenchmarkTypedVsRaw's records:
// about 200 bytes each, as in BenchmarkSinkVsConsume.
const benchOrderSchema = `{"type":"record","name":"Order","namespace":"bench","fields":[
  {"name":"order_id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["CREATED","PAID","SHIPPED"]}},
  {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"note","type":["null","string"],"default":null},
  {"name":"items","type":{"type":"array","items":"string"}}]}`

// BenchmarkTypedVsRaw sinks the same FLOE_BENCH_RECORDS (default
// 1,000,000) Avro records, in the schema registry's wire format, twice in
// one run: into a raw table (the value's bytes) and into a typed table
// (--value registry: decoded into columns). It reports both rates and
// their ratio; then it runs both sinks again, each as its own process (the
// in-process broker would dominate this one's memory and share its CPU),
// and reports their peak resident sets and the CPU time each spent per
// record, whose ratio a busy machine disturbs less than the rates'.
// FLOE_BENCH_CPUPROFILE=FILE writes a CPU profile of the typed sink alone.
//
//	go test ./connector/ -run '^$' -bench TypedVsRaw -benchtime 1x
func BenchmarkTypedVsRaw(b *testing.B) {
	profile := floetest.BenchPath(b, "FLOE_BENCH_CPUPROFILE", floetest.BenchOutFile)
	n := floetest.BenchRecords(b)
	const partitions, topic = 4, "orders"
	e := newEnv(b)
	e.Topic(topic, partitions, nil)
	id, err := localstack.RegisterSchema(e.Ctx, e.Stack.Registry, topic+"-value", sr.Schema{Schema: benchOrderSchema})
	if err != nil {
		b.Fatal(err)
	}
	schema := avro.MustParse(benchOrderSchema)
	type order struct {
		OrderID  int64     `avro:"order_id"`
		Customer string    `avro:"customer"`
		Amount   *big.Rat  `avro:"amount"`
		Status   string    `avro:"status"`
		PlacedAt time.Time `avro:"placed_at"`
		Note     *string   `avro:"note"`
		Items    []string  `avro:"items"`
	}
	note := "leave at the door, ring twice"
	batch := make([]*kgo.Record, 0, 10_000)
	var bytes int
	for i := range n {
		o := order{OrderID: int64(i), Customer: fmt.Sprintf("customer-%06d@example.com", i%100_000),
			Amount: big.NewRat(int64(100+i%50_000), 100), Status: []string{"CREATED", "PAID", "SHIPPED"}[i%3],
			PlacedAt: time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(), Items: []string{"sku-123456", "sku-654321", "sku-000042"}}
		if i%4 == 0 {
			o.Note = &note
		}
		body, err := avro.Marshal(schema, o)
		if err != nil {
			b.Fatal(err)
		}
		v := localstack.WireFormat(id, nil, body)
		bytes += len(v)
		batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: fmt.Appendf(nil, "order-%08d", i),
			Value: v, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
		if len(batch) == cap(batch) || i == n-1 {
			e.Produce(batch)
			batch = batch[:0]
		}
	}
	b.Logf("%d records, %.0f value bytes each", n, float64(bytes)/float64(n))
	b.ResetTimer()
	var rawSec, typedSec float64
	for i := range b.N {
		start := time.Now()
		raw := e.Table(fmt.Sprintf("bench.raw%d", i))
		stats, err := e.sink(raw, connector.Config{Topic: topic, StopAtEnd: true})
		rawSec += time.Since(start).Seconds()
		if err != nil || stats.Records != int64(n) {
			b.Fatalf("raw sink: %d rows, %v", stats.Records, err)
		}
		typed, dlq := e.TypedTable(fmt.Sprintf("bench.typed%d", i), mapping.Layout{Value: mapping.ValueRegistry, Key: mapping.KeyString})
		stopProfile := cpuProfile(b, profile) // the typed sink alone
		start = time.Now()
		stats, err = e.sink(typed, connector.Config{Topic: topic, StopAtEnd: true, Registry: e.Registry(), DeadLetters: dlq})
		typedSec += time.Since(start).Seconds()
		stopProfile()
		if err != nil || stats.Records != int64(n) {
			b.Fatalf("typed sink: %d rows, %d dead letters, %v", stats.Records, stats.DeadLetters, err)
		}
	}
	total := float64(n * b.N)
	b.ReportMetric(total/rawSec, "raw_rec/s")
	b.ReportMetric(total/typedSec, "typed_rec/s")
	b.ReportMetric(rawSec/typedSec, "typed/raw")

	b.StopTimer()
	rawCmd := e.childCmdFrom(topic, "bench.raw_process", connector.DefaultFlushRecords, true, connector.StartEarliest, "")
	reportPeakRSS(b, rawCmd, "raw_maxrss_MiB")
	typedCmd := e.childCmdFrom(topic, "bench.typed_process", connector.DefaultFlushRecords, true, connector.StartEarliest, mapping.ValueRegistry)
	reportPeakRSS(b, typedCmd, "typed_maxrss_MiB")
	rawCPU, typedCPU := cpuSeconds(b, rawCmd), cpuSeconds(b, typedCmd)
	b.ReportMetric(rawCPU/float64(n)*1e6, "raw_cpu_us/rec")
	b.ReportMetric(typedCPU/float64(n)*1e6, "typed_cpu_us/rec")
	b.ReportMetric(rawCPU/typedCPU, "typed/raw_cpu")
}

// cpuProfile starts a CPU profile into the file at path (the benchmark's
// FLOE_BENCH_CPUPROFILE, checked at its start), when it is set, and
// returns what stops it.
func cpuProfile(b *testing.B, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// cpuSeconds returns the CPU time, user and system, of cmd, a process that
// ran.
func cpuSeconds(b *testing.B, cmd *exec.Cmd) float64 {
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no resource usage of the sink process")
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
