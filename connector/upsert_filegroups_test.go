package connector_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestUpsertFilesByBytes: an upsert flush over 200 partitions that keep a
// few dozen rows each writes those rows into one shared file (a file group
// of the ledger spanning their ranges) and its deletes into one file, not
// a data file per partition; three partitions that keep more than a
// stream batch's rows keep files of their own. The table is the fold of
// the log (iceberg-go's scan), the deepest audit is complete before and
// after a compaction, and floe where finds a winning record in the group's
// file.
func TestUpsertFilesByBytes(t *testing.T) {
	e := newEnv(t)
	const topic, partitions, large = "wide_upserts", 200, 3
	e.Topic(topic, partitions, nil)
	tbl, dlq := e.upsertTable("lake.wide_upserts")
	u := newUpsertLog(topic, partitions, 4000, 7)
	recs := u.next(12_000)
	want := u.fold()
	for p := range int32(large) {
		for i := range 9000 {
			k, v := fmt.Sprintf("big%d-%05d", p, i), fmt.Sprintf("bv%d-%d", p, i)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: []byte(v), Timestamp: time.UnixMilli(1_800_000_000_000)})
			want[k] = v
		}
	}
	e.Produce(recs)
	// The offset of each key's last record, and whether it deletes the key.
	type last struct {
		tp     mapping.TopicPartition
		offset int64
		del    bool
	}
	next := map[int32]int64{}
	winners := map[string]last{}
	for _, r := range recs {
		winners[string(r.Key)] = last{mapping.TopicPartition{Topic: topic, Partition: r.Partition}, next[r.Partition], r.Value == nil}
		next[r.Partition]++
	}

	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100_000, FlushInterval: time.Minute, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	byCommit := filesByCommit(t, tbl)
	c := onlyDataCommit(t, tbl, byCommit)
	g := c.FileGroups[0]
	if len(g.Files) != 1 || len(g.Spans) != partitions-large {
		t.Fatalf("the commit's group has %d files and %d spans, want 1 file for the %d small partitions", len(g.Files), len(g.Spans), partitions-large)
	}
	for _, f := range byCommit[c.SnapshotID] {
		inGroup := slices.Contains(g.Files, f.Path)
		if own := f.PartitionMin == f.PartitionMax && f.PartitionMin < large; inGroup == own {
			t.Errorf("file %s of partitions %d-%d (in the group: %v): want the large partitions' files pure, the others' in the group", f.Path, f.PartitionMin, f.PartitionMax, inGroup)
		}
	}
	if dels, data := liveFiles(t, tbl); dels != 1 || data > 2*large+1 {
		t.Fatalf("%d delete files and %d data files, want 1 and at most %d", dels, data, 2*large+1)
	}
	checkFold(t, tbl, want, "after the sink")
	checkLedgerGapless(t, e, tbl, topic)
	auditComplete(t, e, tbl)
	found, deleted := 0, 0
	for k, w := range winners {
		if w.tp.Partition < large || found == 3 && deleted == 1 {
			continue
		}
		if w.del {
			if deleted == 0 {
				deleted++
				kr, err := lookup.WhereKey(e.Ctx, tbl, e.Dial(), k)
				if err != nil || kr.Status != lookup.KeyStatusDeleted {
					t.Fatalf("where --key %s: %+v (%v), want deleted", k, kr, err)
				}
			}
			continue
		}
		if found == 3 {
			continue
		}
		found++
		kr, err := lookup.WhereKey(e.Ctx, tbl, e.Dial(), k)
		if err != nil || kr.Status != lookup.KeyStatusRow || !slices.Contains(g.Files, kr.File) {
			t.Fatalf("where --key %s: %+v (%v), want its row in the group's file", k, kr, err)
		}
		res, err := lookup.Where(e.Ctx, tbl, e.Dial(), w.tp, w.offset)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != lookup.StatusRow || !slices.Contains(g.Files, res.File) {
			t.Fatalf("where %s@%d (key %s): %s in %q (%s), want its row in the group's file", w.tp, w.offset, k, res.Status, res.File, res.Explanation)
		}
	}

	if _, err := tbl.CompactAll(t.Context(), snapshot.CompactOptions{Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	checkFold(t, tbl, want, "after compaction")
	auditComplete(t, e, tbl)
}
