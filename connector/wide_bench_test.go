package connector_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkWideTopic sinks 100,000 records of a 1,000-partition topic (100
// per partition) with --stop-at-end, once with --flush-records 10000 and
// once with the default flush settings, and reports per commit that wrote
// rows: the bytes it added to metadata.json (median), the data files it
// wrote (mean), and its catalog commit time (median,
// snapshot.Result.CommitTime), with the number of such commits and the
// bytes of the ranges file each wrote beside metadata.json (mean; 0 for
// ranges kept inline).
//
//	go test ./connector/ -run '^$' -bench WideTopic -benchtime 1x
func BenchmarkWideTopic(b *testing.B) {
	const partitions, perPartition = 1000, 100
	for _, flush := range []int{10_000, 0} {
		name := "flush=default"
		if flush > 0 {
			name = fmt.Sprintf("flush=%d", flush)
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				e := newEnv(b)
				const topic = "wide"
				e.Topic(topic, partitions, nil)
				for p := range int32(partitions) {
					e.Produce(records(topic, p, perPartition, "w"))
				}
				tbl := e.Table("bench.wide")
				metadata := func() int64 {
					fi, err := os.Stat(strings.TrimPrefix(tbl.Iceberg().MetadataLocation(), "file://"))
					if err != nil {
						b.Fatal(err)
					}
					return fi.Size()
				}
				// The commit's ranges file, if it wrote one (snapshot's
				// floe-ranges folder, named by commit id).
				rangesFile := func(id string) int64 {
					fi, err := os.Stat(strings.TrimPrefix(tbl.Iceberg().Location(), "file://") + "/metadata/floe-ranges/" + id + ".json")
					if err != nil {
						return 0
					}
					return fi.Size()
				}
				var (
					prev                 int64
					added, commitM       []float64
					files, rows, ledgerB int64
				)
				cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: flush, Logger: quietLogger()}
				cfg.OnCommit = func(res snapshot.Result) {
					size := metadata()
					if res.Rows > 0 {
						added = append(added, float64(size-prev))
						commitM = append(commitM, float64(res.CommitTime.Microseconds())/1000)
						files += int64(res.Files)
						rows += res.Rows
						ledgerB += rangesFile(res.Commit.ID)
					}
					prev = size
				}
				b.StartTimer()
				if _, err := e.sink(tbl, cfg); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if rows != partitions*perPartition || len(added) == 0 {
					b.Fatalf("committed %d rows in %d commits, want %d", rows, len(added), partitions*perPartition)
				}
				n := float64(len(added))
				b.ReportMetric(n, "commits")
				b.ReportMetric(median(added), "metadata-B/commit")
				b.ReportMetric(float64(files)/n, "files/commit")
				b.ReportMetric(median(commitM), "commit-ms")
				b.ReportMetric(float64(ledgerB)/n, "ranges-file-B/commit")
			}
		})
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
