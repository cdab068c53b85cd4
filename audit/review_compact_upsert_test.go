package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewUpsertAuditAfterCompactionAndExpiry: an upsert table sunk
// from a mixed log (keys in two partitions, tombstones, no-key records,
// committed and aborted transactions), compacted (deletes applied, delete
// files dropped), sunk further, compacted again, then expired to its last
// snapshot: every level of the audit, content included, finds it complete,
// partitioned by bucket(4, kafka_key) or not.
func TestReviewUpsertAuditAfterCompactionAndExpiry(t *testing.T) {
	for _, spec := range []string{"unpartitioned", "bucket(4, kafka_key)", "unpartitioned-v3", "bucket(4, kafka_key)-v3"} {
		t.Run(spec, func(t *testing.T) {
			v3 := strings.HasSuffix(spec, "-v3")
			spec = strings.TrimSuffix(spec, "-v3")
			e := newEnv(t)
			topic := "acc"
			e.MixedLog(topic, floetest.MixedLog{Partitions: 2, Records: 60, Committed: 10, Aborted: 7})
			key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
			opts := snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString}, Mode: mapping.ModeUpsert, Key: &key}
			if v3 {
				opts.Properties = map[string]string{"format-version": "3"}
			}
			if spec != "unpartitioned" {
				p, err := mapping.ParsePartitionBy(spec)
				if err != nil {
					t.Fatal(err)
				}
				opts.PartitionBy = &p
			}
			tbl, dlq := e.TableWithDeadLetters("lake.acc", opts)
			e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 15, DeadLetters: dlq})
			if _, err := tbl.CompactAll(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
				t.Fatal(err)
			}
			e.Produce(floetest.Records(topic, 0, 30, "b"))
			e.Produce(floetest.Records(topic, 1, 20, "c"))
			e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 7, DeadLetters: dlq})
			if _, err := tbl.CompactAll(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20}); err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
				t.Fatal(err)
			}
			if err := tbl.Refresh(e.Ctx); err != nil {
				t.Fatal(err)
			}
			auditEveryLevel(t, e, tbl)
		})
	}
}

// TestReviewUpsertAuditAfterCompaction: the minimal case of the test
// above. Keys a, b in Kafka partition 0 and c, d in partition 1, then an
// update of a and of c, sunk in two commits; a compaction applies the
// deletes and writes the four live rows into one file (one Iceberg
// partition), which holds rows of both Kafka partitions, as an upsert
// compaction's files do. The rows level (--deep) reports that file as
// altered ("file-content ... it holds rows of partitions 0 to 1"): the
// table is healthy, the audit says NOT COMPLETE.
func TestReviewUpsertAuditAfterCompaction(t *testing.T) {
	e := newEnv(t)
	const topic = "acc2"
	e.Topic(topic, 2, nil)
	tbl, dlq := e.UpsertTable("lake.acc2")
	rec := func(p int32, k, v string) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: []byte(v), Timestamp: time.UnixMilli(1_700_000_000_000)}
	}
	e.Produce([]*kgo.Record{rec(0, "a", "1"), rec(0, "b", "1"), rec(1, "c", "1"), rec(1, "d", "1")})
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	e.Produce([]*kgo.Record{rec(0, "a", "2"), rec(1, "c", "2")})
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	expectFindings(t, e.audit(tbl, rowsDepth))
	res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20})
	if err != nil || res.SnapshotID == 0 || res.Added != 1 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	expectFindings(t, e.audit(tbl, rowsDepth))
}
