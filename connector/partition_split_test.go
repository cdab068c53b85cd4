package connector_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestPartitionedSinkKeepsLongValue: a table partitioned by
// day(kafka_timestamp), records alternating between two days, values of
// 100 bytes but the last, of 40,000. iceberg-go splits the sink's
// 8192-row batch by day with compute.Take on the stream's allocator. Take
// reserves the column's mean size times the rows and takes a buffer's
// capacity for room: with an allocator that hands out more capacity than
// asked (a pool of size classes, tried, see README "Performance") it
// copied up to the slice's length only, and the last record's value was
// cut after 20,068 bytes, silently (or, with the long value earlier, the
// sink panicked in compute's goroutine at every restart). Every byte must
// be read back.
func TestPartitionedSinkKeepsLongValue(t *testing.T) {
	e := newEnv(t)
	e.Topic("events", 1, nil)
	pb, err := mapping.ParsePartitionBy("day(kafka_timestamp)")
	if err != nil {
		t.Fatal(err)
	}
	tbl := e.OpenTable("lake.events", snapshot.OpenOptions{Create: true, PartitionBy: &pb})
	const n = 8192
	day := time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC)
	want := make([][]byte, n)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := bytes.Repeat([]byte{byte('a' + i%26)}, 100)
		if i == n-1 {
			v = bytes.Repeat([]byte{'z'}, 40_000)
		}
		want[i] = v
		recs[i] = &kgo.Record{Topic: "events", Key: fmt.Appendf(nil, "k%05d", i), Value: v,
			Timestamp: day.Add(time.Duration(i%2) * 24 * time.Hour)}
	}
	// One producer batch per record keeps the broker's batches small; the
	// sink's batches are 8192 rows whatever.
	e.Produce(recs)
	if _, err := e.sink(tbl, connector.Config{Topic: "events", StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{{Topic: "events", Partition: 0}: n})
	bad := 0
	err = tbl.Rows(e.Ctx, 0, nil, func(b arrow.RecordBatch) error {
		col := func(name string) arrow.Array { return b.Column(b.Schema().FieldIndices(name)[0]) }
		offs := col(mapping.ColOffset).(*array.Int64)
		vals := col(mapping.ColValue).(*array.Binary)
		for i := range int(b.NumRows()) {
			off := offs.Value(i)
			if got := vals.Value(i); !bytes.Equal(got, want[off]) {
				n := 0
				for n < len(got) && n < len(want[off]) && got[n] == want[off][n] {
					n++
				}
				t.Errorf("offset %d: value of %d bytes differs from the record's %d from byte %d on", off, len(got), len(want[off]), n)
				bad++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if bad > 0 {
		t.Fatalf("%d rows differ from their records", bad)
	}
}
