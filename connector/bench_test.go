package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// BenchmarkSinkVsConsume sinks FLOE_BENCH_RECORDS (default 1,000,000)
// records of about 200 bytes from kfake into the file warehouse and, in the
// same run, consumes the same records with a plain franz-go client (the
// baseline). It reports both rates, their ratio, and the peak resident set
// of the same sink run as its own process.
//
//	go test ./connector/ -run '^$' -bench SinkVsConsume -benchtime 1x
func BenchmarkSinkVsConsume(b *testing.B) {
	n := 1_000_000
	if s := os.Getenv("FLOE_BENCH_RECORDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	const partitions = 4
	e := newEnv(b)
	const topic = "bench"
	e.Topic(topic, partitions, nil)
	value := make([]byte, 160)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	batch := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(i % partitions),
			Key:       fmt.Appendf(nil, "key-%08d", i),
			Value:     value,
			Headers:   []kgo.RecordHeader{{Key: "src", Value: []byte("bench")}},
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))})
		if len(batch) == cap(batch) || i == n-1 {
			e.Produce(batch)
			batch = batch[:0]
		}
	}
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
		if path := os.Getenv("FLOE_BENCH_CPUPROFILE"); path != "" {
			// Profile the sink alone, without producing and the baseline.
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			defer pprof.StopCPUProfile()
		}
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
	cmd := e.childCmd(topic, "bench.rss", connector.DefaultFlushRecords, true)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("sink process: %v\n%s", err, out)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		b.ReportMetric(float64(ru.Maxrss)/1024, "sink_maxrss_MiB")
	}
}

// consumeAll reads every partition to its end offset with a plain franz-go
// consumer, as the baseline a sink cannot beat.
func consumeAll(b *testing.B, e *env, topic string, ends map[mapping.TopicPartition]int64) int {
	assign := map[int32]kgo.Offset{}
	for tp := range ends {
		assign[tp.Partition] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: assign}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	left := len(ends)
	next := map[int32]int64{}
	count := 0
	for left > 0 {
		fs := cl.PollFetches(context.Background())
		if err := fs.Err0(); err != nil {
			b.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			count++
			next[r.Partition] = r.Offset + 1
			if next[r.Partition] == ends[mapping.TopicPartition{Topic: topic, Partition: r.Partition}] {
				left--
			}
		})
	}
	return count
}
