package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestGroupOfOneTableNameInTwoCatalogs (from a new user): two members
// of one --group sink one topic into a table of the same name, but in two
// catalogs (one host's FLOE_CATALOG unset or copied wrong: the default
// floe-data/catalog.db is created and gets a new table). The group divides
// the topic's partitions between them exactly as it does for two tables of
// different names (TestGroupOfTwoTables, refused): each table gets part of
// the topic, nothing warns, and each table's audit sees the partitions the
// other member sinks as lag, not a finding, and says COMPLETE. Seen on the
// local stack: lake.split in its SQLite catalog and lake.split in a
// PostgreSQL catalog each got two of four partitions, the other two stuck
// at offset 0 with lag 416380 and 433785. A member that finds one sinking
// another table (another catalog's, or another table location) in its group
// should stop as it does for another table name, naming --group (or
// --catalog).
func TestGroupOfOneTableNameInTwoCatalogs(t *testing.T) {
	st := ordersStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	type result struct {
		errs string
		err  error
	}
	done := make(chan result, 2)
	for range 2 {
		_, catFlags := localCatalog(t) // a catalog of its own each
		go func() {
			_, errs, err := floeCtx(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--group", "shared",
				"--session-timeout", "6s", "--rebalance-timeout", "10s", "--retry-for", "0s"}, catFlags...)...)
			done <- result{errs, err}
		}()
		time.Sleep(2 * time.Second)
	}
	r := <-done
	cancel()
	<-done
	msg := ""
	if r.err != nil {
		msg = withFlags(r.err)
	}
	if !strings.Contains(msg, "consumer group shared has a member that sinks") || !strings.Contains(msg, "check --") {
		t.Fatalf("one table name in two catalogs in group shared: the first member to stop said %q (nothing stopped the two members until the test's 40 s were up: each table got part of the topic); stderr:\n%s", msg, lastLines(r.errs, 8))
	}
}
