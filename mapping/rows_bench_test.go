package mapping

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkRowBuilder measures turning ~200-byte records into Arrow rows,
// in flushes of 100,000 rows.
func BenchmarkRowBuilder(b *testing.B) {
	sc, err := table.SchemaToArrowSchema(Schema(), nil, true, false)
	if err != nil {
		b.Fatal(err)
	}
	rb, err := NewRowBuilder(memory.NewGoAllocator(), sc)
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Release()
	value := make([]byte, 160)
	recs := make([]*kgo.Record, 1000)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "bench", Offset: int64(i), Key: fmt.Appendf(nil, "key-%08d", i), Value: value,
			Headers: []kgo.RecordHeader{{Key: "src", Value: []byte("bench")}}, Timestamp: time.UnixMilli(int64(i))}
	}
	b.SetBytes(200)
	b.ResetTimer()
	for i := range b.N {
		rb.Append(recs[i%len(recs)])
		if rb.Rows() == 100_000 {
			rb.NewBatch().Release()
		}
	}
}
