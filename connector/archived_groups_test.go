package connector_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestArchivedLaneGroupsWhereAsOfCompaction (from a review): commits
// whose small partitions share a lane (file groups, in ranges files) are
// expired and archived; floe where still names the archived commit's
// group file for an offset it holds, as-of a position inside the first
// commits reads exactly the rows below it (from the head, the snapshot
// having expired), and after a compaction merges the groups, where, as-of
// and the deepest audit still agree with the log.
func TestArchivedLaneGroupsWhereAsOfCompaction(t *testing.T) {
	e := newEnv(t)
	const topic, parts, per, rounds = "archlanes", 12, 5, 3
	want := paddedTopic(e, topic, parts, per)
	tbl := e.Table("lake.archlanes")
	if err := tbl.SetProperties(e.Ctx, map[string]string{snapshot.PropInlineRangesMax: "0"}); err != nil {
		t.Fatal(err)
	}
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, NoMaintain: true, Logger: quietLogger()}
	for round := 1; round <= rounds; round++ {
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		if round == rounds {
			break
		}
		var recs []*kgo.Record
		for p := range int32(parts) {
			recs = append(recs, paddedRecords(topic, p, per, fmt.Sprint(round))...)
			want[mapping.TopicPartition{Topic: topic, Partition: p}] += per
		}
		e.Produce(recs)
	}
	l := mustLedger(t, tbl)
	var first *mapping.Commit
	for i, c := range l.Commits {
		if len(c.FileGroups) > 0 {
			first = &l.Commits[i]
			break
		}
	}
	if first == nil {
		t.Fatal("no commit with a file group")
	}
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	fresh := e.OpenTable(tbl.Name(), snapshot.OpenOptions{})
	if fresh.Iceberg().Metadata().SnapshotByID(first.SnapshotID) != nil {
		t.Fatalf("snapshot %d not expired", first.SnapshotID)
	}
	tp := mapping.TopicPartition{Topic: topic, Partition: 7}
	for _, f := range whereFinds(t, e, fresh, tp, 0, per-1) {
		if !slices.Contains(first.FileGroups[0].Files, f) {
			t.Fatalf("where names %s, not a file of the archived commit's group %v", f, first.FileGroups[0].Files)
		}
	}
	asOf := func(tbl *snapshot.Table, cut int64) {
		t.Helper()
		var spec string
		for p := range parts {
			if spec != "" {
				spec += ","
			}
			spec += fmt.Sprintf("%d=%d", p, cut)
		}
		r, err := lookup.AsOf(e.Ctx, tbl, nil, lookup.AsOfQuery{Offsets: spec})
		if err != nil {
			t.Fatal(err)
		}
		id, _, err := lookup.RowsSnapshot(e.Ctx, tbl, r)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[[2]int64]int{}
		err = tbl.Rows(e.Ctx, id, r.Cut, func(b arrow.RecordBatch) error {
			pc := b.Column(b.Schema().FieldIndices(mapping.ColPartition)[0])
			oc := b.Column(b.Schema().FieldIndices(mapping.ColOffset)[0])
			for i := range int(b.NumRows()) {
				var p, o int64
				fmt.Sscan(pc.ValueStr(i), &p)
				fmt.Sscan(oc.ValueStr(i), &o)
				seen[[2]int64{p, o}]++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) != parts*int(cut) {
			t.Fatalf("as-of %d per partition: %d distinct positions, want %d", cut, len(seen), parts*int(cut))
		}
		for k, n := range seen {
			if n != 1 || k[1] >= cut {
				t.Fatalf("as-of %d: position %v has %d rows", cut, k, n)
			}
		}
	}
	asOf(fresh, 3)
	asOf(fresh, per+2)
	res, err := fresh.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
	if err != nil || res.Replaced == 0 {
		t.Fatalf("compaction: %+v, %v", res, err)
	}
	after := e.OpenTable(tbl.Name(), snapshot.OpenOptions{})
	whereFinds(t, e, after, tp, 0, per, 2*per+1)
	asOf(after, per+2)
	checkExactlyOnce(t, after, want)
	auditComplete(t, e, after)
}
