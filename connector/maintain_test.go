package connector_test

import (
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestSinkMaintainsTable: a cron job of bounded runs, each flushing every
// 10 records, keeps the table's snapshots bounded by its retention
// (floe.history.max-snapshots 5 here) through the sinks' own maintenance,
// and the table stays auditable end to end: ledger, files, rows, and the
// broker with every record's content compared.
func TestSinkMaintainsTable(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 2, nil)
	tbl := e.Table("lake.orders")
	if err := tbl.SetProperties(e.Ctx, map[string]string{table.MinSnapshotsToKeepKey: "2", snapshot.PropMaxSnapshots: "5"}); err != nil {
		t.Fatal(err)
	}
	maintained := 0
	for run := range 8 {
		e.Produce(records("orders", 0, 50, "a"))
		e.Produce(records("orders", 1, 30, "b"))
		st, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, FlushRecords: 10})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		maintained += st.Maintenance
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); maintained == 0 || n > 5+20 {
		t.Fatalf("%d maintenance runs, %d snapshots left: want the sinks to keep at most 25", maintained, n)
	}
	want := map[mapping.TopicPartition]int64{{Topic: "orders", Partition: 0}: 400, {Topic: "orders", Partition: 1}: 240}
	checkExactlyOnce(t, tbl, want)
	for _, d := range []audit.Depth{audit.DepthLedger, audit.DepthFiles, audit.DepthRows} {
		rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: d})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Complete() {
			t.Errorf("audit at depth %d after in-sink maintenance: findings %+v", d, rep.Findings)
		}
	}
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Errorf("broker audit with content after in-sink maintenance: findings %+v", rep.Findings)
	}
}

// TestSinkNoMaintain: with NoMaintain (floe sink --maintain=false) the sink
// expires nothing, whatever the table's retention says.
func TestSinkNoMaintain(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl := e.Table("lake.orders")
	if err := tbl.SetProperties(e.Ctx, map[string]string{table.MinSnapshotsToKeepKey: "1", snapshot.PropMaxSnapshots: "1"}); err != nil {
		t.Fatal(err)
	}
	e.Produce(records("orders", 0, 300, "a"))
	st, err := e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true, FlushRecords: 10, NoMaintain: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); st.Maintenance != 0 || n != st.Commits {
		t.Fatalf("%d maintenance runs, %d snapshots after %d commits: want nothing expired", st.Maintenance, n, st.Commits)
	}
}
