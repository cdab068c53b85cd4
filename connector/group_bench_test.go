package connector_test

import (
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkGroupCommitConflicts sinks one 12-partition topic into one table
// with 1, 2, 3 and 6 members of one consumer group (in one process, each
// with its own broker connection and table handle, as separate processes
// would have). The topic holds FLOE_BENCH_RECORDS (default 1,200,000)
// records of about 200 bytes; members flush every FLOE_BENCH_FLUSH_RECORDS
// (default 100,000) records or every FLOE_BENCH_FLUSH_INTERVAL (default
// 1s), so that commits are frequent and contend for the table. It reports records/s from the members' start
// until the ledger holds the whole topic, commits, conflicts per commit
// (commit attempts beyond the first: another member's commit got in
// between), the mean catalog commit time (attempts, reloads and backoff
// between them included) and fences.
//
//	go test ./connector/ -run '^$' -bench GroupCommitConflicts -benchtime 1x
func BenchmarkGroupCommitConflicts(b *testing.B) {
	n := 1_200_000
	if s := os.Getenv("FLOE_BENCH_RECORDS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	flush := 100_000
	if s := os.Getenv("FLOE_BENCH_FLUSH_RECORDS"); s != "" {
		flush, _ = strconv.Atoi(s)
	}
	interval := time.Second
	if s := os.Getenv("FLOE_BENCH_FLUSH_INTERVAL"); s != "" {
		interval, _ = time.ParseDuration(s)
	}
	const partitions, topic = 12, "groupbench"
	e := newEnv(b)
	e.Topic(topic, partitions, nil)
	value := make([]byte, 160)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	batch := make([]*kgo.Record, 0, 10_000)
	for i := range n {
		batch = append(batch, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: fmt.Appendf(nil, "key-%08d", i), Value: value})
		if len(batch) == cap(batch) || i == n-1 {
			e.Produce(batch)
			batch = batch[:0]
		}
	}
	want := e.endOffsets(topic)
	for _, members := range []int{1, 2, 3, 6} {
		b.Run(fmt.Sprintf("members=%d", members), func(b *testing.B) {
			var sec float64
			var commits, conflicts, fenced, rebalances, commitNanos atomic.Int64
			for i := range b.N {
				table := fmt.Sprintf("bench.m%d_%d", members, i)
				e.Table(table) // created here, not by the members' first commits
				start := time.Now()
				var ms []*member
				for range members {
					cfg := connector.Config{Topic: topic, Group: "bench-" + table, FlushRecords: flush, FlushInterval: interval,
						SessionTimeout: 6 * time.Second, RebalanceTimeout: 10 * time.Second, Logger: quietLogger(),
						OnCommit: func(r snapshot.Result) {
							commits.Add(1)
							conflicts.Add(int64(r.Attempts - 1))
							commitNanos.Add(int64(r.CommitTime))
						},
						OnFenced:    func(error) { fenced.Add(1) },
						OnRebalance: func(connector.Rebalance) { rebalances.Add(1) },
					}
					ms = append(ms, e.startMember(table, cfg))
				}
				waitLedger(b, e, table, want, 10*time.Minute)
				sec += time.Since(start).Seconds()
				for _, m := range ms {
					m.halt(b)
				}
			}
			b.ReportMetric(float64(n*b.N)/sec, "records/s")
			b.ReportMetric(float64(commits.Load())/float64(b.N), "commits")
			if c := commits.Load(); c > 0 {
				b.ReportMetric(float64(conflicts.Load())/float64(c), "conflicts/commit")
				b.ReportMetric(float64(commitNanos.Load())/float64(c)/1e6, "commit-ms")
			}
			b.ReportMetric(float64(fenced.Load())/float64(b.N), "fenced")
			b.ReportMetric(float64(rebalances.Load())/float64(b.N), "rebalances")
		})
	}
}
