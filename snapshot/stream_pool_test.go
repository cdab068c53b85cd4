package snapshot_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/arrowmem"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// poisoned overwrites every buffer freed to it before the pool may hand it
// out again: a reader of freed memory reads garbage instead of the bytes
// it expects.
type poisoned struct{ arrowmem.Pool }

func (p *poisoned) Free(b []byte) {
	b = b[:cap(b)]
	for i := range b {
		b[i] = 0xa5
	}
	p.Pool.Free(b)
}

// TestStreamReusedBuffers: a sink builds rows and encodes Parquet with an
// allocator that reuses freed buffers (arrowmem.Pool). Arrow's builders,
// the Parquet writer and iceberg-go's file writer free buffers when they
// are done with them; one that read a buffer after freeing it would write
// another batch's bytes into the file. Here every freed buffer is poisoned
// at once, and every row read back must be the record written, and every
// buffer allocated must have been freed.
func TestStreamReusedBuffers(t *testing.T) {
	const n, batch = 60_000, 8192
	tbl := openTestTable(t, tempCatalog(t), "lake.pool", snapshot.OpenOptions{Create: true})
	mem := memory.NewCheckedAllocator(&poisoned{})
	rng := rand.New(rand.NewPCG(7, 11))
	want := make([]*kgo.Record, n)
	for i := range want {
		r := &kgo.Record{Topic: "t", Partition: 0, Offset: int64(i), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i))}
		if i%17 != 0 {
			r.Key = fmt.Appendf(nil, "key-%d", rng.IntN(1000))
		}
		if i%29 != 0 {
			r.Value = make([]byte, rng.IntN(400))
			for j := range r.Value {
				r.Value[j] = byte(rng.Uint32())
			}
		}
		for h := range rng.IntN(3) {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprint("h", h), Value: fmt.Appendf(nil, "v%d", rng.IntN(50))})
		}
		want[i] = r
	}
	w, err := tbl.NewWriter(tbl.Iceberg(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := mapping.NewRowBuilder(mem, tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	st := w.Stream(compute.WithAllocator(t.Context(), mem), tbl.ArrowSchema())
	for _, r := range want {
		rb.Append(r)
		if rb.Rows() == batch {
			if err := st.Write(rb.NewBatch()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Write(rb.NewBatch()); err != nil {
		t.Fatal(err)
	}
	rb.Release()
	files, err := st.Close()
	if err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	if _, err := tbl.Commit(t.Context(), snapshot.Flush{Writer: w, Files: map[mapping.TopicPartition][]iceberg.DataFile{tp: files},
		Ranges: []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: n}, Records: n}}}, snapshot.CommitOptions{Writer: "test"}); err != nil {
		t.Fatal(err)
	}
	mem.AssertSize(t, 0)

	seen := 0
	err = tbl.Rows(t.Context(), 0, nil, func(b arrow.RecordBatch) error {
		col := func(name string) arrow.Array { return b.Column(b.Schema().FieldIndices(name)[0]) }
		offs := col(mapping.ColOffset).(*array.Int64)
		keys := col(mapping.ColKey).(*array.Binary)
		vals := col(mapping.ColValue).(*array.Binary)
		hdrs := col(mapping.ColHeaders).(*array.List)
		for i := range int(b.NumRows()) {
			r := want[offs.Value(i)]
			if keys.IsNull(i) != (r.Key == nil) || !bytes.Equal(keys.Value(i), r.Key) {
				return fmt.Errorf("offset %d: key %q, want %q", r.Offset, keys.Value(i), r.Key)
			}
			if vals.IsNull(i) != (r.Value == nil) || !bytes.Equal(vals.Value(i), r.Value) {
				return fmt.Errorf("offset %d: value of %d bytes differs from the %d written", r.Offset, len(vals.Value(i)), len(r.Value))
			}
			if lo, hi := hdrs.ValueOffsets(i); int(hi-lo) != len(r.Headers) {
				return fmt.Errorf("offset %d: %d headers, want %d", r.Offset, hi-lo, len(r.Headers))
			}
			seen++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != n {
		t.Fatalf("read %d rows, want %d", seen, n)
	}
}
