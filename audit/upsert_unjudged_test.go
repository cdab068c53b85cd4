package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/snapshot"
)

// staleRowCompaction replaces every live data file of tbl (an upsert table
// keyed by kafka_key) with one file holding the rows a sink makes of recs,
// in a snapshot marked as a floe compaction (what a compaction that failed
// to apply a key's update within one commit would leave), dropping the
// delete files as a compaction does. Row counts are preserved.
func staleRowCompaction(t *testing.T, e *env, tbl *snapshot.Table, recs []*kgo.Record) {
	t.Helper()
	staleRowCompactionN(t, e, tbl, recs, "3")
}

func staleRowCompactionN(t *testing.T, e *env, tbl *snapshot.Table, recs []*kgo.Record, n string) {
	t.Helper()
	news := floetest.RecordFiles(t, tbl, recs...)
	ice := tbl.Iceberg()
	tasks, err := ice.Scan().PlanFiles(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	txn := ice.NewTransaction()
	rw := txn.NewRewrite(iceberg.Properties{snapshot.KeyOperation: snapshot.OperationCompact,
		snapshot.KeyCompactRows: n, snapshot.KeyCompactLiveRows: n})
	seen := map[string]bool{}
	for _, task := range tasks {
		if !seen[task.File.FilePath()] {
			seen[task.File.FilePath()] = true
			rw.DeleteFile(task.File)
		}
		for _, d := range task.EqualityDeleteFiles {
			if !seen[d.FilePath()] {
				seen[d.FilePath()] = true
				rw.DeleteFile(d)
			}
		}
	}
	for _, df := range news {
		rw.AddDataFile(df)
	}
	if err := rw.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
}

// TestUpsertAuditStaleRowSameCommitRecordGone: one partition, one
// commit: a@0, k@1=old, k@2=new, b@3. The table must hold k@2. A
// compaction-marked snapshot (the only writer the files level trusts to
// rewrite rows) makes k's row k@1 (the superseded value). Retention then
// deletes offsets [0, 2). docs/upsert.md: "A row whose record is gone is
// judged only against later retained records of its key: if one of them
// wins, the row is stale (superseded-row)". k@2 is retained and wins over
// k@1 (same partition, later offset), so the audit must report the row.
// It says COMPLETE: settleUpsert treats any unverifiable row whose commit
// is not older than the winner's as "unjudged", even in the winner's own
// partition, where the later offset always wins.
func TestUpsertAuditStaleRowSameCommitRecordGone(t *testing.T) {
	e := newEnv(t)
	const topic = "stale"
	e.Topic(topic, 1, nil)
	base := time.Unix(1_700_000_000, 0)
	mk := func(k, v string, i int) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(k), Value: []byte(v), Timestamp: base.Add(time.Duration(i) * time.Second)}
	}
	e.Produce([]*kgo.Record{mk("a", "va", 0), mk("k", "old", 1), mk("k", "new", 2), mk("b", "vb", 3)})
	tbl, dlq := e.UpsertTable("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 1000, DeadLetters: dlq})
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range l.Commits {
		t.Logf("commit %d: %v", c.SnapshotID, c.Ranges)
	}
	var logRecs []*kgo.Record
	if err := e.Broker().ReadLog(e.Ctx, topic, 0, 0, 4, func(r *kgo.Record, _ int64) bool {
		logRecs = append(logRecs, r)
		return r.Offset < 3
	}); err != nil {
		t.Fatal(err)
	}
	if len(logRecs) != 4 {
		t.Fatalf("read %d records", len(logRecs))
	}
	// a@0, k@1 (stale: k@2 superseded it), b@3.
	staleRowCompaction(t, e, tbl, []*kgo.Record{logRecs[0], logRecs[1], logRecs[3]})

	// Control: with the log whole, the audit names the stale row.
	rep := e.audit(tbl, contentDepth(e))
	stale := false
	for _, f := range rep.Findings {
		stale = stale || f.Kind == "superseded-row"
	}
	if !stale {
		var sb strings.Builder
		_ = rep.WriteText(&sb)
		t.Fatalf("control: no superseded-row finding with the whole log:\n%s", sb.String())
	}

	// Retention deletes a@0 and k@1; k@2, the winner, is retained.
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 2); err != nil {
		t.Fatal(err)
	}
	rep = e.audit(tbl, contentDepth(e))
	var sb strings.Builder
	_ = rep.WriteText(&sb)
	for _, f := range rep.Findings {
		if f.Kind == "superseded-row" {
			return
		}
	}
	t.Fatalf("the table's row of k is k@1 (\"old\"); its retained record k@2 (\"new\") wins in the same partition, but the audit finds no superseded-row (complete=%v):\n%s", rep.Complete(), sb.String())
}

// TestUpsertAuditCompactedTombstoneKeyInTwoPartitions: a compacted
// topic (delete.retention.ms=0) of two partitions; key k is in both: k=v1
// in partition 0, then a later tombstone of k in partition 1. The sink
// reads both in one commit: the tombstone wins (later timestamp) and k has
// no row, which is right. Log compaction then removes the tombstone
// (delete.retention.ms passed), keeping k=v1 in partition 0 (the latest
// record of k there). docs/upsert.md: "On a compacted topic ... for a
// table keyed by the Kafka key ... the proof holds: ... a key whose
// tombstone compaction removed after the table applied it has no row on
// either side". The audit instead folds k=v1 as k's winner and reports a
// missing row on a table that is right (NOT COMPLETE).
func TestUpsertAuditCompactedTombstoneKeyInTwoPartitions(t *testing.T) {
	e := newEnv(t)
	const topic = "ctomb"
	compact, zero := "compact", "0"
	e.Topic(topic, 2, map[string]*string{"cleanup.policy": &compact, "delete.retention.ms": &zero})
	base := time.Now().Add(-time.Minute)
	rec := func(p int32, k, v string, i int) *kgo.Record {
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: []byte(v), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if v == "-" {
			r.Value = nil
		}
		return r
	}
	// Each Produce is one batch; compaction never touches a partition's last.
	e.Produce([]*kgo.Record{rec(0, "k", "v1", 1)})
	e.Produce([]*kgo.Record{rec(0, "a", "x", 2)})
	e.Produce([]*kgo.Record{rec(1, "k", "-", 3)})
	e.Produce([]*kgo.Record{rec(1, "b", "y", 4)})
	tbl, dlq := e.UpsertTable("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 1000, DeadLetters: dlq})
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	before := e.audit(tbl, contentDepth(e))
	if !before.Complete() {
		var sb strings.Builder
		_ = before.WriteText(&sb)
		t.Fatalf("before compaction:\n%s", sb.String())
	}
	e.Stack.Cluster.Compact()
	var left []string
	if err := e.Broker().ReadLog(e.Ctx, topic, 1, 0, 2, func(r *kgo.Record, _ int64) bool {
		left = append(left, string(r.Key)+"@"+string(rune('0'+r.Offset)))
		return r.Offset < 1
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("partition 1 after compaction: %v", left)
	rep := e.audit(tbl, contentDepth(e))
	var sb strings.Builder
	_ = rep.WriteText(&sb)
	t.Logf("%s", sb.String())
	if !rep.Complete() {
		t.Fatalf("the table (no row of k, deleted by its tombstone) is right, but after compaction removed the tombstone the audit says:\n%s", sb.String())
	}
}

// TestUpsertAuditStaleRowCrossPartitionRecordGone: the variant across
// partitions. One commit: k@0 ("old", t=100 s) and k@1 ("new", t=150 s) in
// partition 0, k@0 ("w", t=200 s) in partition 1: the sink's winner is
// partition 1's (later timestamp). A compaction-marked snapshot makes k's
// row partition 0's k@0 ("old"), a record superseded in its own partition
// by k@1; retention then deletes partition 0's offset 0. k@1 is retained
// and supersedes the row whatever the timestamps, and the winner (1@0) has
// no row, yet the audit says COMPLETE: the row is "unjudged" (its record
// is gone and its commit is the winner's), which also silences the
// missing row of the winner.
func TestUpsertAuditStaleRowCrossPartitionRecordGone(t *testing.T) {
	e := newEnv(t)
	const topic = "stalex"
	e.Topic(topic, 2, nil)
	base := time.Unix(1_700_000_000, 0)
	mk := func(p int32, k, v string, s int) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: []byte(v), Timestamp: base.Add(time.Duration(s) * time.Second)}
	}
	e.Produce([]*kgo.Record{mk(0, "k", "old", 100), mk(0, "k", "new", 150)})
	e.Produce([]*kgo.Record{mk(1, "k", "w", 200)})
	tbl, dlq := e.UpsertTable("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 1000, DeadLetters: dlq})
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	var p0 []*kgo.Record
	if err := e.Broker().ReadLog(e.Ctx, topic, 0, 0, 2, func(r *kgo.Record, _ int64) bool {
		p0 = append(p0, r)
		return r.Offset < 1
	}); err != nil {
		t.Fatal(err)
	}
	staleRowCompactionN(t, e, tbl, []*kgo.Record{p0[0]}, "1")
	rep := e.audit(tbl, contentDepth(e))
	if rep.Complete() {
		t.Fatal("control: the audit finds nothing with the whole log")
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 1); err != nil {
		t.Fatal(err)
	}
	rep = e.audit(tbl, contentDepth(e))
	var sb strings.Builder
	_ = rep.WriteText(&sb)
	if rep.Complete() {
		t.Fatalf("the row of k is 0@0 (\"old\"), superseded by the retained 0@1 in its own partition; the winner 1@0 has no row; the audit says:\n%s", sb.String())
	}
}

// TestUpsertAuditRetainedOlderRecordDeletedKey: the retention variant.
// Key k: k=v1 in partition 0 (first commit), then its tombstone in
// partition 1 (a later commit): the table rightly has no row of k.
// Retention (DeleteRecords) then removes partition 1's offset 0, the
// tombstone; partition 0 keeps k=v1. docs/upsert.md: "a key deleted there
// left nothing to see" — but the audit now folds k=v1 as the key's winner
// and reports a missing row on a right table (NOT COMPLETE), although the
// partition whose start retention removed has commits after v1's.
func TestUpsertAuditRetainedOlderRecordDeletedKey(t *testing.T) {
	e := newEnv(t)
	const topic = "rtomb"
	e.Topic(topic, 2, nil)
	base := time.Now().Add(-time.Minute)
	rec := func(p int32, k string, v *string, i int) *kgo.Record {
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if v != nil {
			r.Value = []byte(*v)
		}
		return r
	}
	v1, x := "v1", "x"
	e.Produce([]*kgo.Record{rec(0, "k", &v1, 1)})
	tbl, dlq := e.UpsertTable("lake." + topic)
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	e.Produce([]*kgo.Record{rec(1, "k", nil, 2), rec(1, "other", &x, 3)})
	e.sink(tbl, connector.Config{Topic: topic, DeadLetters: dlq})
	if before := e.audit(tbl, contentDepth(e)); !before.Complete() {
		var sb strings.Builder
		_ = before.WriteText(&sb)
		t.Fatalf("before retention:\n%s", sb.String())
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 1, 1); err != nil {
		t.Fatal(err)
	}
	rep := e.audit(tbl, contentDepth(e))
	var sb strings.Builder
	_ = rep.WriteText(&sb)
	t.Logf("%s", sb.String())
	if !rep.Complete() {
		t.Fatalf("the table (no row of k, deleted by its tombstone) is right; after retention removed the tombstone the audit says NOT COMPLETE")
	}
}
