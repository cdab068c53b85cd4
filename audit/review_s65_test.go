package audit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

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

// s65HookCatalog runs before(n) before the n-th commit through it.
type s65HookCatalog struct {
	icecat.Catalog
	n      int
	before func(n int)
}

func (c *s65HookCatalog) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c *s65HookCatalog) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	c.n++
	if c.before != nil {
		c.before(c.n)
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, updates)
}

// TestReviewS65HoldsTypedUpsertCompactPartsSchemaChange: a JSON-typed
// upsert table ({"n": int}) compacted in parts of one file; before the
// second and the third part's commits a sink commits records that add a
// column ("extra") and update and delete keys of every part. The
// compaction commits every part; the table holds each key's latest
// record with its columns (the rewritten rows the new column as null),
// and every level of the audit, content included, finds it complete.
func TestReviewS65HoldsTypedUpsertCompactPartsSchemaChange(t *testing.T) {
	e := newEnv(t)
	const topic = "typed"
	e.Topic(topic, 2, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	tbl, dlq := e.TableWithDeadLetters("lake.typed", snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString, Value: mapping.ValueJSON},
		Mode: mapping.ModeUpsert, Key: &key})
	want := map[string]string{}
	seq := 0
	produce := func(n int, extra bool) {
		var recs []*kgo.Record
		for i := range n {
			seq++
			k := fmt.Sprintf("k%02d", (seq*7+i)%24)
			r := &kgo.Record{Topic: topic, Partition: int32(seq % 2), Key: []byte(k), Timestamp: time.UnixMilli(1_700_000_000_000 + int64(seq)*1000)}
			switch {
			case seq%11 == 0:
				delete(want, k)
			case extra:
				r.Value = fmt.Appendf(nil, `{"n":%d,"extra":"e%d"}`, seq, seq)
				want[k] = fmt.Sprintf("%d/e%d", seq, seq)
			default:
				r.Value = fmt.Appendf(nil, `{"n":%d}`, seq)
				want[k] = fmt.Sprintf("%d/(null)", seq)
			}
			recs = append(recs, r)
		}
		e.Produce(recs)
	}
	for range 6 {
		produce(12, false)
		e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 12, DeadLetters: dlq})
	}
	var size int64
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		size = max(size, f.SizeBytes)
	}
	cat, ident := e.CatalogOf("lake.typed")
	hc := &s65HookCatalog{Catalog: cat}
	hc.before = func(n int) {
		if n == 2 || n == 3 {
			produce(10, true)
			e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 10, DeadLetters: dlq})
		}
	}
	comp, err := snapshot.Open(e.Ctx, hc, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := comp.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, CommitBytes: size, Logger: floetest.QuietLogger()})
	if err != nil || res.Commits < 3 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	got := map[string]string{}
	for _, r := range floetest.Rows(t, tbl) {
		extra, ok := r.Columns["extra"]
		if !ok {
			extra = "(null)"
		}
		if _, dup := got[r.Key]; dup {
			t.Errorf("key %s twice", r.Key)
		}
		got[r.Key] = r.Columns["n"] + "/" + extra
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows after the compaction:\n%v\nwant\n%v", got, want)
	}
	auditEveryLevel(t, e, tbl)
}
