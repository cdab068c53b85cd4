package connector_test

// A scenario of files by bytes (lanes, file groups), from a review: a wide
// topic sunk in lanes, compacted and expired, every guarantee checked end
// to end (exactly once, the audit, where, files).

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// checkLanesLookups checks, for every row of tbl, that floe where finds it
// in a live file whose manifest bounds admit it, and that floe files adds
// up to the rows.
func checkLanesLookups(t *testing.T, e *env, tbl *snapshot.Table) {
	t.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	rs := rows(t, tbl)
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]snapshot.DataFile{}
	for _, f := range files {
		live[f.Path] = f
	}
	fr, err := lookup.Files(e.Ctx, tbl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Records != int64(len(rs)) {
		t.Errorf("floe files adds up to %d records, the table has %d rows", fr.Records, len(rs))
	}
	for _, f := range fr.Files {
		if f.Group != nil {
			continue
		}
		lf := live[f.Path]
		if lf.PartitionMin != lf.PartitionMax {
			t.Errorf("floe files lists %s (partitions %d-%d) without a group", f.Path, lf.PartitionMin, lf.PartitionMax)
		}
	}
	for _, r := range rs {
		res, err := lookup.Where(e.Ctx, tbl, nil, r.TP, r.Offset)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != lookup.StatusRow {
			t.Errorf("where %s@%d: %s (%s), want a row", r.TP, r.Offset, res.Status, res.Explanation)
			continue
		}
		f, ok := live[res.File]
		if !ok || f.PartitionMin > r.TP.Partition || f.PartitionMax < r.TP.Partition || f.Offsets.Low > r.Offset || f.Offsets.High <= r.Offset {
			t.Errorf("where %s@%d names %s, which is not live or cannot hold it", r.TP, r.Offset, res.File)
		}
	}
}

// auditAllowing runs the row-level audit with the broker and the content
// level on a freshly opened tbl, and fails on any finding not of an
// allowed kind.
func auditAllowing(t *testing.T, e *env, tbl *snapshot.Table, allowed ...audit.Kind) *audit.Report {
	t.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	fresh := e.OpenTable(tbl.Name(), snapshot.OpenOptions{})
	rep, err := audit.Run(e.Ctx, fresh, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if !slices.Contains(allowed, f.Kind) {
			t.Errorf("audit finding: %s %s %s %s: %s", f.Level, f.Kind, f.Partition, f.Offsets, f.Detail)
		}
	}
	return rep
}

// TestLanesScenario sinks rounds of small flushes over 10 partitions
// (lanes), with aborted transactions and a recorded loss, compacting
// between rounds, then expires; every offset once, the audit clean but
// for the loss, where and files right.
func TestLanesScenario(t *testing.T) {
	for _, spec := range []string{"", "bucket(3, kafka_key)", "hour(kafka_timestamp)"} {
		t.Run(fmt.Sprintf("spec=%q", spec), func(t *testing.T) {
			e := newEnv(t)
			const topic, parts = "mix", 10
			e.Topic(topic, parts, nil)
			opts := snapshot.OpenOptions{Create: true}
			if spec != "" {
				pb, err := mapping.ParsePartitionBy(spec)
				if err != nil {
					t.Fatal(err)
				}
				opts.PartitionBy = &pb
			}
			tbl := e.OpenTable("lake.mix", opts)
			rng := rand.New(rand.NewPCG(1, 2))
			base := time.UnixMilli(1_700_000_000_000).Truncate(time.Hour).Add(59 * time.Minute)
			n := 0
			lossy := false
			for round := range 6 {
				var recs []*kgo.Record
				for p := range int32(parts) {
					for range 1 + rng.IntN(12) {
						n++
						recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", n%17),
							Value: fmt.Appendf(nil, "%-60s", fmt.Sprint("v", n)), Timestamp: base.Add(time.Duration(n) * time.Second)})
					}
				}
				e.Produce(recs)
				if round%2 == 1 {
					e.Txn(fmt.Sprint("tx", round), []*kgo.Record{{Topic: topic, Partition: 2, Value: []byte("aborted")}, {Topic: topic, Partition: 3, Value: []byte("aborted")}}, false)
					e.Txn(fmt.Sprint("ty", round), []*kgo.Record{{Topic: topic, Partition: 2, Value: []byte("committed")}, {Topic: topic, Partition: 4, Value: []byte("committed")}}, true)
				}
				if round == 3 {
					hw := e.endOffsets(topic)[mapping.TopicPartition{Topic: topic, Partition: 1}]
					if err := e.Stack.Cluster.DeleteRecords(topic, 1, hw-1); err != nil {
						t.Fatal(err)
					}
					lossy = true
				}
				if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 25, OnDataLoss: connector.LossRecord}); err != nil {
					t.Fatal(err)
				}
				if round%2 == 0 {
					res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("round %d compaction: %d groups, %d replaced, %d added, %d unplaced, files %d -> %d", round, res.Groups, res.Replaced, res.Added, res.Unplaced, res.FilesBefore, res.FilesAfter)
				}
			}
			grouped := 0
			for _, c := range mustLedger(t, tbl).Commits {
				grouped += len(c.FileGroups)
			}
			if grouped == 0 {
				t.Fatal("no commit has a file group")
			}
			var allowed []audit.Kind
			if lossy {
				allowed = append(allowed, audit.KindLost)
			}
			auditAllowing(t, e, tbl, allowed...)
			checkLanesLookups(t, e, tbl)
			if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()}); err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
				t.Fatal(err)
			}
			auditAllowing(t, e, tbl, allowed...)
			checkLanesLookups(t, e, tbl)
			// More lanes after the expiry, then a compaction that merges the
			// expired commits' groups with the new ones.
			var recs []*kgo.Record
			for p := range int32(parts) {
				recs = append(recs, paddedRecords(topic, p, 3, "late")...)
			}
			e.Produce(recs)
			if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 25, OnDataLoss: connector.LossRecord}); err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
				t.Fatal(err)
			}
			res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("after expiry compaction: %d groups, %d replaced, %d added, %d unplaced, files %d -> %d", res.Groups, res.Replaced, res.Added, res.Unplaced, res.FilesBefore, res.FilesAfter)
			auditAllowing(t, e, tbl, allowed...)
			checkLanesLookups(t, e, tbl)
		})
	}
}
