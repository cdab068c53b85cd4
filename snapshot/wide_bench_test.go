package snapshot_test

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkWideCommits measures a sink of a 1,000-partition topic whose
// every partition is busy, in steady state: 150 commits of one range per
// partition each (no data files: only the metadata is measured), with the
// sink's own maintenance after each (AutoMaintain: at most 100-120
// snapshots kept), once with every commit's ranges inline (ledger version
// 2, as floe before ranges files wrote them:
// floe.ledger.inline-max-bytes set above any commit) and once at the
// default (ranges files). It reports for each the median commit time
// (snapshot.Result.CommitTime) of the last 50 commits, the bytes the
// last commit's metadata.json has and the bytes a commit added to it
// (median), and the ratio of the medians, files / inline.
//
//	go test ./snapshot/ -run '^$' -bench WideCommits -benchtime 1x
func BenchmarkWideCommits(b *testing.B) {
	const partitions, commits, last = 1000, 150, 50
	type result struct{ ms, metadata, added float64 }
	run := func(b *testing.B, props map[string]string) result {
		tbl := wideTable(b, props)
		var ms, added []float64
		size := func() int64 {
			fi, err := os.Stat(strings.TrimPrefix(tbl.Iceberg().MetadataLocation(), "file://"))
			if err != nil {
				b.Fatal(err)
			}
			return fi.Size()
		}
		quiet := slog.New(slog.DiscardHandler)
		for i := range commits {
			rs := make([]mapping.Range, partitions)
			for p := range rs {
				rs[p] = mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: int32(p)}, Interval: mapping.Interval{Low: int64(10 * i), High: int64(10*i + 10)}}
			}
			before := size()
			res, err := tbl.Commit(b.Context(), snapshot.Flush{Ranges: rs}, snapshot.CommitOptions{Writer: "bench", Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			added = append(added, float64(size()-before))
			ms = append(ms, float64(res.CommitTime.Microseconds())/1000)
			if _, _, err := tbl.AutoMaintain(b.Context(), quiet); err != nil {
				b.Fatal(err)
			}
		}
		return result{ms: medianOf(ms[commits-last:]), metadata: float64(size()), added: medianOf(added)}
	}
	for range b.N {
		inline := run(b, map[string]string{snapshot.PropInlineRangesMax: fmt.Sprint(1 << 30)})
		files := run(b, nil)
		b.ReportMetric(inline.ms, "inline-commit-ms")
		b.ReportMetric(files.ms, "files-commit-ms")
		b.ReportMetric(files.ms/inline.ms, "files/inline-commit")
		b.ReportMetric(inline.metadata/1e3, "inline-metadata.json-KB")
		b.ReportMetric(files.metadata/1e3, "files-metadata.json-KB")
		b.ReportMetric(inline.added, "inline-added-B/commit")
		b.ReportMetric(files.added, "files-added-B/commit")
	}
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
