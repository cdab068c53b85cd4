package main

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

// TestEngineSpecNotBlamedOnFlag: an upsert table another engine
// partitioned by hour(kafka_timestamp) is refused at the sink's start
// (Writable, a2f98c7) with a *mapping.PartitionByError, which the CLI
// rewrites as a --partition-by error: a user who passed no --partition-by
// is told the flag's value is wrong.
//
// From a review of this change; fixed since.
func TestEngineSpecNotBlamedOnFlag(t *testing.T) {
	st, loc := sinkStack(t)
	args := append([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.acc",
		"--mode", "upsert", "--key", "string", "--stop-at-end"}, loc...)
	if code, out, errs := floe(t, args...); code != 0 {
		t.Fatalf("first sink: exit %d\n%s\n%s", code, out, errs)
	}
	tbl := foreignTable(t, st.Catalog(), "lake.acc")
	txn := tbl.NewTransaction()
	upd := txn.UpdateSpec(true)
	upd.AddField("kafka_timestamp", iceberg.HourTransform{}, "ts_hour")
	if err := upd.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	code, _, errs := floe(t, args...)
	t.Logf("exit %d: %s", code, errs)
	if code == 0 {
		t.Fatal("the sink into the engine-partitioned upsert table was not refused")
	}
	if strings.Contains(errs, "--partition-by") {
		t.Errorf("a sink given no --partition-by is refused as if its --partition-by were wrong:\n%s", strings.TrimSpace(errs))
	}
}
