package mapping

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/hamba/avro/v2"
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

// benchOrder is the Avro schema of connector's BenchmarkTypedVsRaw.
const benchOrder = `{"type":"record","name":"Order","namespace":"bench","fields":[
  {"name":"order_id","type":"long"},
  {"name":"customer","type":"string"},
  {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["CREATED","PAID","SHIPPED"]}},
  {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"note","type":["null","string"],"default":null},
  {"name":"items","type":{"type":"array","items":"string"}}]}`

// BenchmarkAvroRows measures turning BenchmarkTypedVsRaw's Avro records
// into typed rows, in batches of 16,384: through the canonical values
// (Decode, AppendDecoded, as the content audit decodes) and through the
// fast path (DecodeTape, AppendTape, as a sink does).
//
//	go test ./mapping/ -run '^$' -bench AvroRows -benchmem
func BenchmarkAvroRows(b *testing.B) {
	codec, err := NewAvroCodec(benchOrder, nil)
	if err != nil {
		b.Fatal(err)
	}
	schema := avro.MustParse(benchOrder)
	recs := make([]*kgo.Record, 1000)
	note := "leave at the door, ring twice"
	for i := range recs {
		o := map[string]any{"order_id": int64(i), "customer": fmt.Sprintf("customer-%06d@example.com", i),
			"amount": big.NewRat(int64(100+i), 100), "status": []string{"CREATED", "PAID", "SHIPPED"}[i%3],
			"placed_at": time.UnixMilli(1_700_000_000_000 + int64(i)).UTC(), "note": nil,
			"items": []string{"sku-123456", "sku-654321", "sku-000042"}}
		if i%4 == 0 {
			o["note"] = note
		}
		v, err := avro.Marshal(schema, o)
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: "orders", Offset: int64(i), Key: fmt.Appendf(nil, "order-%08d", i), Value: v,
			Timestamp: time.UnixMilli(int64(i))}
	}
	l := Layout{Value: ValueRegistry}
	sc, err := WriterArrowSchema(l.WriterSchema(nil, codec.Type().(*iceberg.StructType)))
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, add func(rb *RowBuilder, r *kgo.Record) error) {
		rb, err := l.NewRowBuilder(memory.NewGoAllocator(), sc)
		if err != nil {
			b.Fatal(err)
		}
		defer rb.Release()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := add(rb, recs[i%len(recs)]); err != nil {
				b.Fatal(err)
			}
			if rb.Rows() == 16_384 {
				rb.NewBatch().Release()
			}
		}
	}
	b.Run("canonical", func(b *testing.B) {
		run(b, func(rb *RowBuilder, r *kgo.Record) error {
			v, err := codec.Decode(r.Value)
			if err != nil {
				return err
			}
			return rb.AppendDecoded(r, r.Key, v.(map[string]any))
		})
	})
	b.Run("tape", func(b *testing.B) {
		rb, err := l.NewRowBuilder(memory.NewGoAllocator(), sc)
		if err != nil {
			b.Fatal(err)
		}
		va, err := rb.NewValueAppender(codec.Type())
		rb.Release()
		if err != nil {
			b.Fatal(err)
		}
		tc := codec.(TapeCodec)
		var t Tape
		run(b, func(rb *RowBuilder, r *kgo.Record) error {
			if err := tc.DecodeTape(r.Value, &t); err != nil {
				return err
			}
			return rb.AppendTape(r, r.Key, va, &t)
		})
	})
}
