package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestWrongTopicIntoGoodTableNotDropAdvice (from a new-user run): floe
// sink -t orders into a Debezium table of another topic's rows sank only
// dead letters and exited 3 telling the user to remove the table with
// floe drop, which would lose its good rows. A table that held rows of
// other topics before the run gets docs/deployment.md's way back for a
// wrong --topic, a replay of its own topic onto a branch published over
// it; a table the run created keeps the drop advice.
func TestWrongTopicIntoGoodTableNotDropAdvice(t *testing.T) {
	const topic = "dbz.inv.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(5, 5, 1)
	st, sink, _ := upsertStack(t, topic, 1, c.Records(t, floetest.CDCConnectJSON, ""))
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 1, 20, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.dbz_customers", "--envelope", "debezium", "--value", "json", "--key", "json"})...); code != 0 {
		t.Fatalf("create: exit %d\n%s\n%s", code, out, errs)
	}
	orders := slices.Clone(sink)
	orders[slices.Index(orders, topic)] = "orders"
	code, out, errs := floe(t, slices.Concat(orders, []string{"--table", "lake.dbz_customers"})...)
	want := "floe replay --topic " + topic + " --table lake.dbz_customers --branch rebuild --publish --publish-different"
	if code != exitOnlyDeadLetters || !strings.Contains(errs, want) || strings.Contains(errs, "floe drop --table") {
		t.Errorf("wrong topic into a table of rows: exit %d, want %d and %q, no floe drop\n%s\n%s", code, exitOnlyDeadLetters, want, out, errs)
	}
	code, out, errs = floe(t, slices.Concat(orders, []string{"--table", "lake.new_dbz", "--envelope", "debezium", "--value", "json", "--key", "json"})...)
	if code != exitOnlyDeadLetters || !strings.Contains(errs, "floe drop --table lake.new_dbz") || strings.Contains(errs, "floe replay") {
		t.Errorf("wrong topic into a table the run created: exit %d, want %d and the drop advice\n%s\n%s", code, exitOnlyDeadLetters, out, errs)
	}
}
