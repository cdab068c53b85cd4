package connector_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// upsertBenchValue is a 160-byte value, as BenchmarkSinkVsConsume's, with
// the record's sequence number in front so that every value differs.
func upsertBenchValue(seq int) []byte {
	v := make([]byte, 160)
	for i := range v {
		v[i] = byte('a' + i%26)
	}
	copy(v, fmt.Sprintf("%010d", seq))
	return v
}

// produceUpsertBench produces n keyed changes of about 200 bytes over
// n/10 keys to a topic of 4 partitions (a key always in the same
// partition): 5% tombstones, 20% updates of a key written in the last
// 1,000 records (hot keys, written again within a flush), the rest a key
// drawn uniformly. It returns the live rows (key -> sequence number of
// its value), the fold of the log.
func produceUpsertBench(e *env, topic string, n int) map[int]int {
	const partitions = 4
	e.Topic(topic, partitions, nil)
	keys := max(n/10, 1)
	rng := rand.New(rand.NewPCG(22, 1))
	live := map[int]int{}
	recent := make([]int, 0, 1000)
	batch := make([]*kgo.Record, 0, 10_000)
	for seq := range n {
		k := rng.IntN(keys)
		if len(recent) > 0 && rng.IntN(100) < 20 {
			k = recent[rng.IntN(len(recent))]
		}
		if len(recent) < cap(recent) {
			recent = append(recent, k)
		} else {
			recent[seq%cap(recent)] = k
		}
		r := &kgo.Record{Topic: topic, Partition: int32(k % partitions), Key: fmt.Appendf(nil, "key-%08d", k),
			Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("bench")}}, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(seq))}
		if rng.IntN(100) < 5 {
			delete(live, k)
		} else {
			r.Value = upsertBenchValue(seq)
			live[k] = seq
		}
		batch = append(batch, r)
		if len(batch) == cap(batch) || seq == n-1 {
			e.Produce(batch)
			batch = batch[:0]
		}
	}
	return live
}

// produceLiveRows produces the live rows of a fold (key -> sequence
// number) as records to a new topic of one partition: what an append
// table of the same live rows is sunk from. One partition, so that the
// append table is one file, as the compacted upsert table is: a scan
// reads files in parallel, and four files against one would compare the
// cores used more than the tables.
func produceLiveRows(e *env, topic string, live map[int]int) {
	e.Topic(topic, 1, nil)
	batch := make([]*kgo.Record, 0, 10_000)
	i := 0
	for k, seq := range live {
		batch = append(batch, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%08d", k), Value: upsertBenchValue(seq),
			Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("bench")}}, Timestamp: time.UnixMilli(1_700_000_000_000 + int64(seq))})
		i++
		if len(batch) == cap(batch) || i == len(live) {
			e.Produce(batch)
			batch = batch[:0]
		}
	}
}

// readWhole reads every row of the table's branch head with iceberg-go's
// scan (deletes applied) and returns the rows and the seconds it took.
func readWhole(b *testing.B, tbl *snapshot.Table) (int64, float64) {
	if err := tbl.Refresh(b.Context()); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	_, it, err := tbl.Iceberg().Scan(table.WithSnapshotID(tbl.Head().SnapshotID)).ToArrowRecords(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for rec, err := range it {
		if err != nil {
			b.Fatal(err)
		}
		n += rec.NumRows()
		rec.Release()
	}
	return n, time.Since(start).Seconds()
}

// BenchmarkUpsertVsAppend sinks the same FLOE_BENCH_RECORDS (default
// 1,000,000) keyed changes over a tenth as many keys (5% tombstones, 20%
// updates of recent keys) twice in one run, into an append table and into
// an upsert table (--mode upsert --key string), with --flush-records
// 100000, and reports both rates and their ratio (the target: at
// least 0.5). Then it reads the upsert table whole with iceberg-go's scan
// before and after a compaction (floe maintain --compact), and an append
// table of the same live rows (sunk from a topic of one partition holding
// only them: one file, as the compacted table is), and reports the read
// times (of the two small reads, the fastest of five alternated) and the
// ratio of the compacted read to the append table's (target: at most
// 1.2). Last it runs the upsert sink as its own process, at its default
// --flush-records (100,000, connector.DefaultUpsertFlushRecords) and at
// 500,000 (the append default), and reports its peak resident set
// (target: at most 400 MiB at the default).
//
//	go test ./connector/ -run '^$' -bench UpsertVsAppend -benchtime 1x
func BenchmarkUpsertVsAppend(b *testing.B) {
	n := floetest.BenchRecords(b)
	e := newEnv(b)
	const topic, flush = "changes", 100_000
	live := produceUpsertBench(e, topic, n)
	b.ResetTimer()
	var appendSec, upsertSec float64
	var upsert *snapshot.Table
	for i := range b.N {
		tbl := e.Table(fmt.Sprintf("bench.append%d", i))
		start := time.Now()
		stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: flush})
		appendSec += time.Since(start).Seconds()
		if err != nil {
			b.Fatal(err)
		}
		if stats.Records != int64(n) {
			b.Fatalf("append sink committed %d rows, want %d", stats.Records, n)
		}

		var dlq *snapshot.Table
		upsert, dlq = e.upsertTable(fmt.Sprintf("bench.upsert%d", i))
		start = time.Now()
		if _, err := e.sink(upsert, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: flush, DeadLetters: dlq}); err != nil {
			b.Fatal(err)
		}
		upsertSec += time.Since(start).Seconds()
	}
	b.StopTimer()
	// Each figure is logged as well: a benchmark that fails (a peak above
	// the ceiling) prints no metrics.
	report := func(v float64, unit string) {
		b.ReportMetric(v, unit)
		b.Logf("%s %.4g", unit, v)
	}
	total := float64(n * b.N)
	report(total/appendSec, "append_rec/s")
	report(total/upsertSec, "upsert_rec/s")
	report(appendSec/upsertSec, "upsert/append")

	rows, before := readWhole(b, upsert)
	if rows != int64(len(live)) {
		b.Fatalf("the upsert table reads %d rows, the fold has %d", rows, len(live))
	}
	res, err := upsert.Compact(b.Context(), snapshot.CompactOptions{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	produceLiveRows(e, "live", live)
	liveTbl := e.Table("bench.live")
	if _, err := e.sink(liveTbl, connector.Config{Topic: "live", StopAtEnd: true}); err != nil {
		b.Fatal(err)
	}
	// Reads of a hundred milliseconds are at the mercy of a busy machine:
	// the two tables are read in turn, five times each, and the fastest
	// read of each is compared.
	after, appendRead := math.Inf(1), math.Inf(1)
	for range 5 {
		rows, sec := readWhole(b, upsert)
		if rows != int64(len(live)) {
			b.Fatalf("the compacted upsert table reads %d rows, the fold has %d", rows, len(live))
		}
		after = min(after, sec)
		if rows, sec = readWhole(b, liveTbl); rows != int64(len(live)) {
			b.Fatalf("the append table of the live rows reads %d rows, want %d", rows, len(live))
		}
		appendRead = min(appendRead, sec)
	}
	report(float64(len(live)), "live_rows")
	report(before*1000, "read_uncompacted_ms")
	report(after*1000, "read_compacted_ms")
	report(appendRead*1000, "read_append_live_ms")
	report(after/appendRead, "compacted/append_read")
	report(res.Duration.Seconds(), "compaction_s")
	report(float64(res.DroppedDeletes), "delete_files_dropped")
	report(float64(res.FilesAfter), "compacted_files")

	// 0 is the sink's default for an upsert table
	// (connector.DefaultUpsertFlushRecords), which must stay under the
	// ceiling; 500,000 (the append default, asked for explicitly) shows
	// what holding a larger flush costs.
	for _, f := range []int{0, connector.DefaultFlushRecords} {
		cmd := e.childCmdFrom(topic, fmt.Sprintf("bench.rss%d", f), f, true, connector.StartEarliest, "")
		cmd.Env = append(cmd.Env, "FLOE_TEST_MODE="+string(mapping.ModeUpsert))
		metric := fmt.Sprintf("upsert_maxrss_flush%dk_MiB", f/1000)
		if f == 0 {
			metric = "upsert_maxrss_default_flush_MiB"
		}
		rss := reportPeakRSS(b, cmd, metric)
		b.Logf("%s %.0f", metric, rss)
		if f == 0 && rss > upsertRSSCeilingMiB {
			b.Errorf("the upsert sink's peak resident set at the default flush is %.0f MiB, above the %d MiB ceiling", rss, upsertRSSCeilingMiB)
		}
	}
}

// upsertRSSCeilingMiB is the peak resident set BenchmarkUpsertVsAppend
// allows an upsert sink process (issue 22's target).
const upsertRSSCeilingMiB = 400
