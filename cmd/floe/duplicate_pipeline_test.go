package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestDuplicatePipelineRefused (from a new user): a config file whose
// pipelines list the same topic and table twice (a copy-paste slip) ran two
// pipelines on the same partitions of one table in one process. They fenced
// each other at every commit, for as long as the sink ran ("fenced by
// another writer of the same partitions ... two sinks of one topic and
// table redo each other's work", 3 times in 6 s of a live sink, and its
// summary "fenced 3 times by another writer": the other writer was itself).
// floe already refuses, before anything is created, a --dlq-table that is
// the table of another pipeline of the run; two pipelines that write the
// same partitions of the same table are as certainly a mistake and should
// be refused the same way (exit 2, naming the config file's pipelines).
func TestDuplicatePipelineRefused(t *testing.T) {
	st, loc := sinkStack(t)
	cfg := filepath.Join(t.TempDir(), "floe.yaml")
	writeFile(t, cfg, fmt.Sprintf(`brokers: [%s]
catalog: %q
warehouse: %q
pipelines:
  - {topic: orders, table: lake.orders}
  - {topic: orders, table: lake.orders}
`, st.Brokers[0], loc[1], loc[3]))
	code, out, errs := floe(t, "sink", "--config", cfg, "--stop-at-end")
	if code != exitError || !strings.Contains(errs, "pipeline") {
		t.Errorf("two identical pipelines orders -> lake.orders: exit %d\nstdout:\n%s\nstderr (last lines):\n%s\nwant exit 2 naming the duplicate pipeline, before anything is created", code, out, lastLines(errs, 5))
	}
	code, _, _ = floe(t, "status", "--table", "lake.orders", "--catalog", loc[1])
	if code == 0 {
		t.Errorf("the refused run created lake.orders")
	}
}
