package main

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// rowsByOffset returns, per partition and offset, how many rows the head of
// tbl holds.
func rowsByOffset(t *testing.T, tbl *snapshot.Table) map[mapping.TopicPartition]map[int64]int {
	t.Helper()
	out := map[mapping.TopicPartition]map[int64]int{}
	if tbl.Head() == nil {
		return out
	}
	err := tbl.Rows(t.Context(), 0, nil, func(b arrow.RecordBatch) error {
		var topic *array.String
		var part *array.Int32
		var off *array.Int64
		for i, f := range b.Schema().Fields() {
			switch f.Name {
			case mapping.ColTopic:
				topic = b.Column(i).(*array.String)
			case mapping.ColPartition:
				part = b.Column(i).(*array.Int32)
			case mapping.ColOffset:
				off = b.Column(i).(*array.Int64)
			}
		}
		for r := 0; r < int(b.NumRows()); r++ {
			tp := mapping.TopicPartition{Topic: topic.Value(r), Partition: part.Value(r)}
			if out[tp] == nil {
				out[tp] = map[int64]int{}
			}
			out[tp][off.Value(r)]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWhereAfterForeignRewriteOfGroupFile (from a review): a commit's file group
// (a lane of 6 small partitions, split in two files by bucket(2,
// kafka_key)); another writer deletes one row copy-on-write, which
// rewrites the one file holding it. Every other record still has its row
// in the table, but floe where looks only in the group's files that are
// still live (likelyFirst drops every other multi-partition candidate once
// one hinted file is live) and says the rows of the rewritten file are
// missing.
func TestWhereAfterForeignRewriteOfGroupFile(t *testing.T) {
	const topic, parts = "wg", 6
	st, _, _ := partitionedStack(t, topic, parts)
	count := map[int32]int64{}
	produceRound(t, st.Brokers, topic, parts, 60, count)
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", topic, "--table", "lake.wg", "--stop-at-end", "--partition-by", "bucket(2, kafka_key)"}, cat...)...)
	tbl := openTable(t, cfg, "lake.wg")
	files, err := tbl.Files(t.Context(), tbl.Head().SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Logf("file %s: partitions %d-%d offsets %s rows %d", f.Path, f.PartitionMin, f.PartitionMax, f.Offsets, f.Records)
	}
	if len(files) != 2 || files[0].PartitionMin == files[0].PartitionMax || files[1].PartitionMin == files[1].PartitionMax {
		t.Fatalf("want the commit's rows in two files of several partitions (a file group split by bucket), got %d files", len(files))
	}
	before := map[string]bool{files[0].Path: true, files[1].Path: true}
	foreignDelete(t, cfg, "lake.wg", iceberg.EqualTo(iceberg.Reference(mapping.ColKey), []byte("k0")), table.WriteModeCopyOnWrite)
	tbl = openTable(t, cfg, "lake.wg")
	files, err = tbl.Files(t.Context(), tbl.Head().SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, f := range files {
		if before[f.Path] {
			kept++
		}
	}
	if kept != 1 {
		t.Fatalf("want one of the group's files rewritten by the other writer, the other kept: %d kept of %d", kept, len(files))
	}
	rows := rowsByOffset(t, tbl)
	wrong := 0
	for p := range int32(parts) {
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		for off := int64(0); off < count[p]; off++ {
			if rows[tp][off] != 1 {
				continue // the row the other writer deleted
			}
			w, err := lookup.Where(t.Context(), tbl, nil, tp, off)
			if err != nil {
				t.Fatal(err)
			}
			if w.Status != lookup.StatusRow {
				wrong++
				if wrong <= 2 {
					t.Errorf("where %s@%d: %s (%s), but the table holds its row", tp, off, w.Status, w.Explanation)
					_, out, errs := floe(t, append([]string{"where", "--table", "lake.wg", "--topic", topic, "--partition", fmt.Sprint(p), "--offset", fmt.Sprint(off), "--brokers", st.Brokers[0]}, cat...)...)
					t.Logf("floe where --brokers:\n%s%s", out, errs)
				}
			}
		}
	}
	if wrong > 0 {
		t.Errorf("%d rows the table holds are not found by floe where", wrong)
	}
}
