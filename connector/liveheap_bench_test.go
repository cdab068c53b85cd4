package connector_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkLiveSinkHeap runs one sink, with its default settings but
// --flush-records 8, on a 4-partition topic of a broker in a process of
// its own; a producer writes the next 8 records (two a partition) as each
// commit lands. The sink's in-sink maintenance holds the snapshots at
// about 100 and archives the others, so the ledger archive grows with
// every commit. It measures the process's live heap (after a GC, the
// broker not in it) once a tenth of FLOE_BENCH_COMMITS commits (3,000)
// are in and at the end, and fails when the end's is more than 1.25 times
// the tenth's: a live sink's memory must not grow with the table's
// history (issue 23: 12 -> 21 MB over 3,000 commits).
// FLOE_BENCH_HEAPPROFILE names a folder for heap profiles at both points
// (sink-heap-N.pprof).
//
//	go test ./connector/ -run '^$' -bench LiveSinkHeap -benchtime 1x
func BenchmarkLiveSinkHeap(b *testing.B) {
	commits := floetest.BenchCommits(b, 3000)
	probe := floetest.NewHeapProbe(b, "sink-heap")
	for b.Loop() {
		e := newEnv(b)
		e.Stack.Brokers = floetest.StartBrokerProcess(b)
		const topic, flush = "live", 8
		e.Topic(topic, 4, nil)
		tbl := e.Table("bench.live")
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		produced := 0
		produce := func(ctx context.Context) error {
			recs := make([]*kgo.Record, flush)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: topic, Partition: int32(produced % 4), Key: fmt.Appendf(nil, "key-%08d", produced),
					Value: fmt.Appendf(nil, `{"n":%d,"pad":"%0100d"}`, produced, 0)}
				produced++
			}
			return cl.ProduceSync(ctx, recs...).FirstErr()
		}
		ctx, cancel := context.WithCancel(e.Ctx)
		defer cancel()
		next := make(chan struct{}, 1)
		var n int
		var early, late float64
		cfg := connector.Config{Topic: topic, FlushRecords: flush, Logger: quietLogger(), OnCommit: func(res snapshot.Result) {
			if res.Rows == 0 {
				return // the run's start commit
			}
			n++
			switch n {
			case commits / 10:
				early = probe.LiveMiB(n)
			case commits:
				late = probe.LiveMiB(n)
				cancel()
				return
			}
			next <- struct{}{}
		}}
		runPaced(ctx, b, e, tbl, cfg, produce, next)
		floetest.ReportGrowth(b, early, late, commits)
	}
}
