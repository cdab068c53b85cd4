package connector_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
)

// TestPooledFetchesEveryCodec: records produced with each compression
// codec (the consumer decompresses into pooled slices, and recycles every
// record at the end of its poll), JSON values whose columns evolve
// mid-flush (errSchemaFlush re-reads a record after a flush inside the
// poll), dead letters, and polls cut short by small flushes (a batch's
// records spread over several polls): every row and dead letter must be
// its record, read back at content level.
func TestPooledFetchesEveryCodec(t *testing.T) {
	for _, codec := range []kgo.CompressionCodec{kgo.GzipCompression(), kgo.Lz4Compression(), kgo.ZstdCompression(), kgo.SnappyCompression()} {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			e := newEnv(t)
			e.Topic("orders", 2, nil)
			tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyString})
			cl, err := kgo.NewClient(kgo.SeedBrokers(e.Stack.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(0))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			rng := rand.New(rand.NewPCG(9, 10))
			var recs []*kgo.Record
			for p := int32(0); p < 2; p++ {
				for i := range 6000 {
					v := fmt.Sprintf(`{"id":%d,"s":%q}`, i, strings.Repeat("x", rng.IntN(300)))
					switch {
					case i%701 == 3:
						v = "not json"
					case i >= 4000:
						v = fmt.Sprintf(`{"id":%d.5,"s":%q,"n":{"a":[%d]}}`, i, strings.Repeat("y", rng.IntN(300)), i)
					}
					recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)})
				}
			}
			if err := cl.ProduceSync(e.Ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if _, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, FlushRecords: 2500, DeadLetters: dlq}); err != nil {
				t.Fatal(err)
			}
			floetest.CheckWithDeadLetters(t, tbl, dlq, e.endOffsets("orders"))
			auditComplete(t, e, tbl)
		})
	}
}
