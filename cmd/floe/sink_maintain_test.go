package main

import (
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// TestSinkMaintainFlag: floe sink --maintain=false expires nothing; by
// default the sink expires what the table's retention says between its
// commits, and the table audits complete.
func TestSinkMaintainFlag(t *testing.T) {
	st, loc := sinkStack(t)
	tbl := auditTable(t, st, "lake.orders")
	if err := tbl.SetProperties(t.Context(), map[string]string{table.MinSnapshotsToKeepKey: "1", snapshot.PropMaxSnapshots: "1"}); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--flush-records", "5"}, loc...)
	mustFloe(t, append(sink, "--maintain=false")...)
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n != len(l.Commits) || n < 21 {
		t.Fatalf("%d snapshots for %d commits after --maintain=false: want every commit's, and over 20", n, len(l.Commits))
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 3, 30, time.Now(), 2)); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, sink...)
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n > 1+20 {
		t.Fatalf("%d snapshots after a sink with maintenance, want at most 21", n)
	}
	mustFloe(t, append([]string{"audit", "--table", "lake.orders", "--deep", "--brokers", st.Brokers[0]}, loc...)...)
}
