package audit_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestSpreadGroupsAuditAfterCompactions: lanes over different sets of
// partitions, in tables partitioned so that a lane spreads over several
// Iceberg partitions, compacted twice (the second re-merging the first's
// outputs with new lanes): complete at every level after each compaction,
// now that such lanes merge with one another (from the review of it).
func TestSpreadGroupsAuditAfterCompactions(t *testing.T) {
	for _, spec := range []string{"identity(kafka_partition)", "bucket(4, kafka_key)", "hour(kafka_timestamp)"} {
		t.Run(spec, func(t *testing.T) {
			e := newEnv(t)
			topic := "spread"
			e.Topic(topic, 8, nil)
			pb, err := mapping.ParsePartitionBy(spec)
			if err != nil {
				t.Fatal(err)
			}
			tbl := e.OpenTable("lake.spread", snapshot.OpenOptions{Create: true, PartitionBy: &pb})
			next := map[int32]int{}
			round := func(parts ...int32) {
				var recs []*kgo.Record
				for _, p := range parts {
					for range 5 {
						i := next[p]
						next[p]++
						recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i%7),
							Value: fmt.Appendf(nil, "v-%d-%d", p, i), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)*600_000)})
					}
				}
				e.Produce(recs)
				e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 100_000})
			}
			round(0, 1, 2, 3, 4)
			round(1, 2, 3, 4, 5, 6)
			round(0, 2, 4, 6, 7)
			round(0, 1, 3, 5, 7)
			before := sortedRows(t, tbl)
			auditEveryLevel(t, e, tbl)
			res := compact(t, tbl)
			t.Logf("first: %+v", res)
			if after := sortedRows(t, tbl); !reflect.DeepEqual(after, before) {
				t.Fatal("rows changed by the first compaction")
			}
			auditEveryLevel(t, e, tbl)
			expectFindings(t, e.audit(tbl, audit.Options{Depth: audit.DepthRows}))
			round(0, 1, 2, 3, 4, 5, 6, 7)
			round(1, 3, 5, 6, 7)
			round(0, 1, 2, 3, 4, 5, 6, 7)
			round(0, 2, 3, 4, 6)
			round(0, 1, 2, 3, 4, 5, 6, 7)
			before = sortedRows(t, tbl)
			res = compact(t, tbl)
			t.Logf("second: %+v", res)
			if after := sortedRows(t, tbl); !reflect.DeepEqual(after, before) {
				t.Fatal("rows changed by the second compaction")
			}
			auditEveryLevel(t, e, tbl)
			round(0, 1, 2, 3, 4, 5, 6, 7)
			round(0, 1, 2, 3, 4, 5, 6, 7)
			round(0, 1, 2, 3, 4, 5, 6, 7)
			res, err = tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("third: %+v", res)
			auditEveryLevel(t, e, tbl)
			for p, n := range next {
				for _, o := range []int64{0, int64(n) / 2, int64(n) - 1} {
					res, err := lookup.Where(e.Ctx, tbl, e.Dial(), mapping.TopicPartition{Topic: topic, Partition: p}, o)
					if err != nil || res.Status != lookup.StatusRow {
						t.Errorf("where %d/%d: %+v %v", p, o, res, err)
					}
				}
			}
		})
	}
}
