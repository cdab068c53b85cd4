package snapshot_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkDeadLetterMetadata measures how much a dead-letter table's
// metadata.json grows per commit when each commit of the data table has a
// dead letter in each of 200 partitions (issue 19, item 7: about 30 KB
// while each snapshot of the dead-letter table listed its files in its
// summary), beside the data table's growth. Nothing is expired.
//
//	go test -run '^$' -bench BenchmarkDeadLetterMetadata -benchtime 12x ./snapshot/
func BenchmarkDeadLetterMetadata(b *testing.B) {
	const parts = 200
	_, tbl, dlq := deadLetterTables(b)
	size := func(t *snapshot.Table) int64 {
		if err := t.Refresh(b.Context()); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(strings.TrimPrefix(t.Iceberg().MetadataLocation(), "file://"))
		if err != nil {
			b.Fatal(err)
		}
		return st.Size()
	}
	dlq0, data0 := size(dlq), size(tbl)
	sc, err := mapping.DeadLetterArrowSchema(dlq.Iceberg().Schema())
	if err != nil {
		b.Fatal(err)
	}
	var i int64
	for b.Loop() {
		f := snapshot.Flush{DeadLetters: map[mapping.TopicPartition][]arrow.RecordBatch{}}
		for p := range int32(parts) {
			rb, err := mapping.NewDeadLetterBuilder(memory.DefaultAllocator, sc)
			if err != nil {
				b.Fatal(err)
			}
			r := &kgo.Record{Topic: "t", Partition: p, Offset: 2*i + 1, Timestamp: base, Value: []byte("bad")}
			if err := rb.AppendDeadLetter(r, "not JSON", 0); err != nil {
				b.Fatal(err)
			}
			tp := mapping.TopicPartition{Topic: "t", Partition: p}
			f.DeadLetters[tp] = []arrow.RecordBatch{rb.NewBatch()}
			rb.Release()
			f.Ranges = append(f.Ranges, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: 2 * i, High: 2*i + 2}, DeadLetters: 1})
		}
		if _, err := tbl.Commit(b.Context(), f, snapshot.CommitOptions{Writer: "bench", DeadLetters: dlq}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(size(dlq)-dlq0)/float64(i), "dlq-metadata-B/commit")
	b.ReportMetric(float64(size(tbl)-data0)/float64(i), "data-metadata-B/commit")
}

// BenchmarkDeadLetterKeptFilesRolledBackTips measures a dead-letter
// table's maintenance (the files it keeps: keptFiles) when its data table
// holds 100 lines that rollbacks left and nobody undid (each a commit with
// a dead letter above main, main rolled back below it and sunk again),
// against the same history without them. The data table has 200 commits
// archived, then 100 on main, each with a dead letter.
//
//	go test -run '^$' -bench BenchmarkDeadLetterKeptFilesRolledBackTips -benchtime 10x ./snapshot/
func BenchmarkDeadLetterKeptFilesRolledBackTips(b *testing.B) {
	for _, tips := range []int{0, 100} {
		b.Run(fmt.Sprintf("tips=%d", tips), func(b *testing.B) {
			_, tbl, dlq := deadLetterTables(b)
			quiet := floetest.QuietLogger()
			var off int64
			commit := func() snapshot.Result {
				res := mustDeadCommit(b, tbl, dlq, "t", 0, mapping.Interval{Low: off, High: off + 2}, off+1)
				off += 2
				return res
			}
			for range 200 {
				commit()
			}
			if _, err := tbl.Maintain(b.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}); err != nil {
				b.Fatal(err)
			}
			for i := range 100 {
				if i < tips {
					// A commit rolled back: main set back to its parent,
					// and the same offsets sunk again.
					head := tbl.Head().SnapshotID
					commit()
					setMain(b, tbl, head)
					off -= 2
				}
				commit()
			}
			if err := dlq.Refresh(b.Context()); err != nil {
				b.Fatal(err)
			}
			// The first run expires the dead-letter table's snapshots; the
			// runs measured find nothing more to expire.
			opts := snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}
			if _, err := dlq.Maintain(b.Context(), opts); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := dlq.Maintain(b.Context(), opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
