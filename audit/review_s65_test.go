package audit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// s65DyingCatalog applies `lives` commits, then answers every load and
// commit with an error: a process killed after its lives-th commit.
type s65DyingCatalog struct {
	icecat.Catalog
	lives int
}

var errS65Killed = errors.New("killed")

func (c *s65DyingCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	if c.lives <= 0 {
		return nil, errS65Killed
	}
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c *s65DyingCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	if c.lives <= 0 {
		return nil, "", errS65Killed
	}
	c.lives--
	return c.Catalog.CommitTable(ctx, ident, reqs, updates)
}

// TestReviewS65HoldsUpsertAuditAfterPartialCompaction: an upsert table
// sunk from a mixed log (keys in two partitions, tombstones, no-key
// records, committed and aborted transactions) is compacted in parts of
// one file, the process dying after 1, then 2 parts; the sink commits
// more between; a last compaction in parts completes. After every step,
// every level of the audit, content included, finds it complete,
// partitioned by bucket(4, kafka_key) or not.
func TestReviewS65HoldsUpsertAuditAfterPartialCompaction(t *testing.T) {
	for _, spec := range []string{"unpartitioned", "bucket(4, kafka_key)"} {
		t.Run(spec, func(t *testing.T) {
			e := newEnv(t)
			topic := "acc"
			e.MixedLog(topic, floetest.MixedLog{Partitions: 2, Records: 60, Committed: 10, Aborted: 7})
			key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
			opts := snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString}, Mode: mapping.ModeUpsert, Key: &key}
			if spec != "unpartitioned" {
				p, err := mapping.ParsePartitionBy(spec)
				if err != nil {
					t.Fatal(err)
				}
				opts.PartitionBy = &p
			}
			tbl, dlq := e.TableWithDeadLetters("lake.acc", opts)
			e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 9, DeadLetters: dlq})
			var size int64
			files, err := tbl.Files(e.Ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				size = max(size, f.SizeBytes)
			}
			for lives := 1; lives <= 2; lives++ {
				cat, ident := e.CatalogOf("lake.acc")
				dying, err := snapshot.Open(e.Ctx, &s65DyingCatalog{Catalog: cat, lives: lives}, ident, snapshot.OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				res, err := dying.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, CommitBytes: size, Logger: floetest.QuietLogger()})
				if err == nil || res.Commits != lives {
					t.Fatalf("a compaction dying after %d parts: %+v, %v", lives, res, err)
				}
				if err := tbl.Refresh(e.Ctx); err != nil {
					t.Fatal(err)
				}
				auditEveryLevel(t, e, tbl)
				e.Produce(floetest.Records(topic, 0, 20, fmt.Sprintf("b%d", lives)))
				e.Produce(floetest.Records(topic, 1, 15, fmt.Sprintf("c%d", lives)))
				e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 7, DeadLetters: dlq})
				auditEveryLevel(t, e, tbl)
			}
			res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, CommitBytes: 2 * size})
			if err != nil || res.Commits < 2 || res.DroppedDeletes == 0 {
				t.Fatalf("the last compaction: %+v, %v", res, err)
			}
			auditEveryLevel(t, e, tbl)
		})
	}
}
