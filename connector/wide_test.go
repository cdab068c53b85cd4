package connector_test

import (
	"os"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestWideSinkMaintainsRangesFiles: a cron job of bounded sinks whose every
// commit keeps its ranges in a ranges file, with retention tight enough
// that the sinks' own maintenance expires commits: the expired commits'
// ranges are archived, every live snapshot's ranges file is kept, and a
// table opened afresh audits complete at every level, content included.
func TestWideSinkMaintainsRangesFiles(t *testing.T) {
	e := newEnv(t)
	const topic, partitions = "wide", 40
	e.Topic(topic, partitions, nil)
	tbl := e.Table("lake.wide")
	if err := tbl.SetProperties(e.Ctx, map[string]string{snapshot.PropInlineRangesMax: "0",
		table.MinSnapshotsToKeepKey: "2", snapshot.PropMaxSnapshots: "5"}); err != nil {
		t.Fatal(err)
	}
	maintained, commits := 0, 0
	grouped := map[string]int{} // file groups by commit id, as committed
	for run := range 6 {
		for p := range int32(partitions) {
			e.Produce(records(topic, p, 5, "w"))
		}
		st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 40,
			OnCommit: func(r snapshot.Result) { grouped[r.Commit.ID] = len(r.Commit.FileGroups) }})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		maintained += st.Maintenance
		commits += st.Commits
	}
	if maintained == 0 {
		t.Fatalf("no maintenance in %d commits", commits)
	}
	fresh := e.OpenTable(tbl.Name(), snapshot.OpenOptions{})
	meta := fresh.Iceberg().Metadata()
	if n := len(meta.Snapshots()); n >= commits {
		t.Fatalf("%d snapshots after %d commits: nothing expired", n, commits)
	}
	for _, s := range meta.Snapshots() {
		ref := s.Summary.Properties[mapping.KeyRangesFile]
		if ref == "" {
			t.Fatalf("snapshot %d keeps its ranges inline, want a ranges file", s.SnapshotID)
		}
		if _, err := os.Stat(strings.TrimPrefix(ref, "file://")); err != nil {
			t.Fatalf("the ranges file of live snapshot %d: %v", s.SnapshotID, err)
		}
	}
	want := map[mapping.TopicPartition]int64{}
	for p := range int32(partitions) {
		want[mapping.TopicPartition{Topic: topic, Partition: p}] = 30
	}
	checkExactlyOnce(t, fresh, want)
	l, err := fresh.Ledger()
	if err != nil || len(l.Commits) != commits {
		t.Fatalf("ledger: %d commits, %v; want all %d", len(l.Commits), err, commits)
	}
	// Archived or live, a commit keeps its file groups (in its ranges file,
	// then in the archive).
	withGroups := 0
	for _, c := range l.Commits {
		if len(c.FileGroups) != grouped[c.ID] {
			t.Fatalf("commit %s read back with %d file groups, committed with %d", c.ID, len(c.FileGroups), grouped[c.ID])
		}
		if len(c.FileGroups) > 0 {
			withGroups++
		}
	}
	if withGroups == 0 {
		t.Fatal("no commit has file groups: flushes of 40 records over 40 partitions should group them")
	}
	rep, err := audit.Run(e.Ctx, fresh, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Errorf("audit after in-sink maintenance of ranges-file commits: findings %+v", rep.Findings)
	}
}

// TestWideSinkMemoryBounded: a sink process over 200 busy partitions
// (500,000 records of about 200 bytes, 2,500 a partition: none reaches a
// stream batch, and the default flush takes them all) moves their rows to
// the flush's spill lane as they come instead of holding the flush's 100
// MB until it ends: its peak resident set stays under the ceiling the
// throughput benchmarks hold on 4 partitions (benchRSSCeilingMiB; 466-490
// MiB on 100 partitions and 610-677 MiB on 1,000 before the spill lane),
// and the table reads back exactly once.
func TestWideSinkMemoryBounded(t *testing.T) {
	e := newEnv(t)
	const topic, table = "wide-memory", "lake.wide_memory"
	e.ProduceBenchOver(topic, 500_000, 200)
	peak, ok := peakRSS(t, e.childCmd(topic, table, connector.DefaultFlushRecords, true))
	if !ok {
		t.Skip("no peak resident set without /proc")
	}
	if peak > benchRSSCeilingMiB {
		t.Errorf("the sink's peak resident set over 200 partitions is %.0f MiB, above %d MiB", peak, benchRSSCeilingMiB)
	}
	t.Logf("peak resident set %.0f MiB", peak)
	checkExactlyOnce(t, e.Table(table), e.endOffsets(topic))
}
