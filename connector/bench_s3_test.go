package connector_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkSinkS3 sinks the same FLOE_BENCH_RECORDS (default 1,000,000)
// records of about 200 bytes, as BenchmarkSinkVsConsume produces them,
// into the file warehouse (the baseline) and, in the same run, into an
// s3:// warehouse on each real S3 server of the S3 suite
// (testenv.S3Servers: versitygw and MinIO, each in its own process on
// loopback TCP, storing on the same disk). It reports each rate, each
// server's ratio to the file warehouse's, and the CPU seconds each target
// spent per million records, the server's included: on a machine shared
// with other work, wall-clock rates move with the load and the CPU cost
// does not. A missing server skips the
// benchmark (fails it under FLOE_REQUIRE_SERVERS=1), as in the tests.
//
//	go test ./connector/ -run '^$' -bench SinkS3 -benchtime 1x
func BenchmarkSinkS3(b *testing.B) {
	n := floetest.BenchRecords(b)
	e := newEnv(b)
	const topic = "bench"
	e.ProduceBench(topic, n)

	// Each target opens a new table per iteration; the S3 ones in an
	// s3:// warehouse of their server, through the stack's SQLite catalog.
	type target struct {
		name string
		open func(table string) *snapshot.Table
		srv  *testenv.S3Server // nil for the file warehouse
		sec  float64           // wall time of its sinks
		cpu  time.Duration     // CPU time of its sinks: this process's and its server's
	}
	targets := []*target{{name: "file", open: e.Table}}
	for _, f := range testenv.S3Servers() {
		srv := f.Start(b)
		srv.CreateBucket(b, "bench")
		cfg := e.Stack.Catalog()
		cfg.Warehouse = "s3://bench/warehouse"
		cfg.Logger = quietLogger()
		cfg.S3 = catalog.S3Config{Endpoint: srv.Endpoint, Region: srv.Region, AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
		targets = append(targets, &target{name: f.Name, srv: srv, open: func(table string) *snapshot.Table {
			cat, err := catalog.Open(e.Ctx, cfg)
			if err != nil {
				b.Fatalf("open the catalog with an s3:// warehouse on %s: %v", f.Name, err)
			}
			ident, err := catalog.ParseIdent(table)
			if err != nil {
				b.Fatal(err)
			}
			tbl, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{Create: true})
			if err != nil {
				b.Fatalf("create %s on %s: %v", table, f.Name, err)
			}
			return tbl
		}})
	}

	// A first read of the whole topic, untimed: the first pass over
	// freshly produced records is slower (the producer's garbage is still
	// being collected), and it would weigh on whichever target came first.
	if got := consumeAll(b, e, topic, e.endOffsets(topic)); got != n {
		b.Fatalf("warm-up read %d records, want %d", got, n)
	}
	b.ResetTimer()
	for i := range b.N {
		// Interleaved, each iteration starting with the next target, so
		// that whatever else the machine does weighs on every target
		// alike.
		for k := range targets {
			tg := targets[(i+k)%len(targets)]
			tbl := tg.open(fmt.Sprintf("bench.%s%d", tg.name, i))
			cpu0 := cpuTime(b, tg.srv)
			start := time.Now()
			stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true})
			tg.sec += time.Since(start).Seconds()
			tg.cpu += cpuTime(b, tg.srv) - cpu0
			if err != nil || stats.Records != int64(n) {
				b.Fatalf("sink into %s: %d rows, %v; want %d rows", tg.name, stats.Records, err, n)
			}
		}
	}
	total := float64(n * b.N)
	base := targets[0].sec
	for _, tg := range targets {
		b.ReportMetric(total/tg.sec, tg.name+"_rec/s")
		b.ReportMetric(tg.cpu.Seconds()*1e6/total, tg.name+"_cpu_s/Mrec")
		if tg != targets[0] {
			b.ReportMetric(base/tg.sec, tg.name+"/file")
		}
	}
}

// cpuTime returns the CPU time this process has used, plus srv's when srv
// is not nil. CPU time, unlike wall time, does not depend on what else the
// machine runs; this process's also counts the in-process broker serving
// the sink, the same work for every target.
func cpuTime(b *testing.B, srv *testenv.S3Server) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	d := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if srv != nil {
		s, err := srv.CPUTime()
		if err != nil {
			b.Fatal(err)
		}
		d += s
	}
	return d
}
