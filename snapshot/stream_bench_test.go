package snapshot_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkStream measures what a sink spends per record besides reading
// the log: BenchmarkSinkVsConsume's records (a 12-byte key, a 160-byte
// value, one header) built into Arrow rows in batches of 8k and encoded
// into Parquet through one Stream, as one partition's goroutine does. It
// reports the CPU seconds per million rows (user and system time of the
// whole process, the encoder's goroutine included): the figure to compare
// encoding settings by, in alternated runs; and the data files' bytes per
// row (the benchmark's values are alike: they compress far better than
// most payloads).
//
//	go test ./snapshot/ -run '^$' -bench Stream -benchtime 10x -count 4
func BenchmarkStream(b *testing.B) {
	const rows, batch = 250_000, 8192
	value := make([]byte, 160)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	// One batch of records, rewritten in place: a heap of all the rows'
	// records would make the garbage collector's work unlike a sink's.
	recs := make([]kgo.Record, batch)
	for i := range recs {
		recs[i] = kgo.Record{Topic: "bench", Value: value, Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("bench")}}}
	}
	tbl := openTestTable(b, tempCatalog(b), "lake.bench", snapshot.OpenOptions{Create: true})
	w, err := tbl.NewWriter(tbl.Iceberg(), nil)
	if err != nil {
		b.Fatal(err)
	}
	var (
		cpu  time.Duration
		size int64
	)
	b.ResetTimer()
	for range b.N {
		before := cpuTime(b)
		rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
		if err != nil {
			b.Fatal(err)
		}
		st := w.Stream(b.Context(), tbl.ArrowSchema())
		for i := range rows {
			r := &recs[i%batch]
			r.Offset, r.Timestamp = int64(i), time.UnixMilli(1_700_000_000_000+int64(i))
			r.Key = strconv.AppendInt(append(r.Key[:0], "key-"...), int64(i), 10)
			rb.Append(r)
			if rb.Rows() == batch {
				if err := st.Write(rb.NewBatch()); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := st.Write(rb.NewBatch()); err != nil {
			b.Fatal(err)
		}
		files, err := st.Close()
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range files {
			size += f.FileSizeBytes()
		}
		rb.Release()
		cpu += cpuTime(b) - before
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N*rows)*1e6, "cpu_s/Mrows")
	b.ReportMetric(float64(size)/float64(b.N*rows), "file_B/row")
}
