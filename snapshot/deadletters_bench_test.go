package snapshot_test

import (
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

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
