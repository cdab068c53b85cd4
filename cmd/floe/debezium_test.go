package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestDebeziumSinkCommand runs floe sink --envelope debezium as a user
// would, on a Debezium capture of a customers table written with the
// AvroConverter (a snapshot, updates, deletes with their tombstones, a
// truncate, then new rows): the table read back with iceberg-go's scan is
// the customers table, and the flags' mistakes are refused with one line.
func TestDebeziumSinkCommand(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	st, _, _ := partitionedStack(t, topic, 1)
	c := floetest.NewCustomers(topic, 1)
	c.Story(25, 80, 9)
	c.Truncate()
	c.Insert(floetest.Customer{ID: 700, FirstName: "Grace", LastName: "Hopper", Email: "grace@example.com", CreatedAt: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)})
	if err := localstack.Produce(t.Context(), st.Brokers, c.Records(t, floetest.CDCAvro, st.Registry)); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	sink := append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", topic, "--table", "lake.customers", "--stop-at-end", "--flush-records", "30"}, loc...)
	args := func(more ...string) []string { return slices.Concat(sink, more) }
	registry := []string{"--value", "registry", "--key", "registry", "--schema-registry", st.Registry}
	cdc := args(append([]string{"--envelope", "debezium"}, registry...)...)

	for _, bad := range []struct {
		args []string
		want string
	}{
		{slices.Concat(cdc, []string{"--mode", "append"}), "--envelope debezium makes an upsert table, not --mode append"},
		{slices.Concat(cdc, []string{"--id-columns", "email"}), "--envelope debezium keys the rows by the record key"},
		{args("--envelope", "debezium", "--value", "registry", "--schema-registry", st.Registry), "--envelope debezium needs --value and --key"},
		{args("--envelope", "debezium", "--value", "raw", "--key", "raw"), "want json or registry with --envelope debezium"},
		{args("--envelope", "maxwell", "--value", "json", "--key", "json"), `--envelope "maxwell": want none or debezium`},
		{slices.Concat(cdc, []string{"--on-truncate", "ignore"}), `--on-truncate "ignore": want dead-letter or delete-all`},
	} {
		code, out, errs := floe(t, bad.args...)
		if code != exitError || !strings.Contains(errs, bad.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || out != "" {
			t.Errorf("floe %v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", bad.args[len(sink):], code, out, errs, bad.want)
		}
	}

	code, out, errs := floe(t, slices.Concat(cdc, []string{"--on-truncate", "delete-all"})...)
	if code != 0 {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	tbl := openTable(t, cfg, "lake.customers")
	c.CheckTable(t, floetest.Rows(t, tbl), floetest.CDCAvro, true)

	// The table keeps its envelope: a run without the flags sinks it as
	// before, one of another envelope is refused.
	if code, out, errs := floe(t, args("--schema-registry", st.Registry)...); code != 0 {
		t.Fatalf("sink without --envelope: exit %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = floe(t, args(append([]string{"--envelope", "none"}, registry...)...)...)
	if code != exitError || !strings.Contains(errs, "keeps its envelope as debezium, not none") {
		t.Fatalf("--envelope none sink into a Debezium table: exit %d, %q", code, errs)
	}

	// A replay onto a branch, with the table's flags (docs/upsert.md) or
	// none, rebuilds it and publishes.
	replay := append([]string{"replay", "-b", strings.Join(st.Brokers, ","), "-t", topic, "--table", "lake.customers", "--publish"}, loc...)
	for branch, more := range map[string][]string{
		"rebuild": slices.Concat([]string{"--envelope", "debezium", "--on-truncate", "delete-all"}, registry),
		"again":   {"--schema-registry", st.Registry},
	} {
		if code, out, errs := floe(t, slices.Concat(replay, []string{"--branch", branch}, more)...); code != 0 || !strings.Contains(out, "published") {
			t.Fatalf("replay --branch %s: exit %d\n%s\n%s", branch, code, out, errs)
		}
		c.CheckTable(t, floetest.Rows(t, openTable(t, cfg, "lake.customers")), floetest.CDCAvro, true)
	}
}

// TestDebeziumUnavailableValueAudit: the events of updates that left a
// TOASTed column out are dead letters the sink reports, and the content
// audit, which decodes the log as the sink does, finds the table equal to
// it (every key's row that of its latest complete event).
func TestDebeziumUnavailableValueAudit(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(10, 20, 3)
	ids := slices.Sorted(maps.Keys(c.State()))
	c.UpdateUnavailable(ids[0], func(cu *floetest.Customer) { cu.FirstName = "Toasted" })
	st, sink, loc := upsertStack(t, topic, 1, c.Records(t, floetest.CDCConnectJSON, ""))
	code, out, errs := floe(t, append(sink, "--table", "lake.customers", "--envelope", "debezium", "--value", "json", "--key", "json")...)
	if code != 0 || !strings.Contains(out, "1 dead letter") {
		t.Fatalf("sink: exit %d, want 0 and 1 dead letter\n%s\n%s", code, out, errs)
	}
	c.CheckTable(t, floetest.Rows(t, openTable(t, st.Catalog(), "lake.customers")), floetest.CDCConnectJSON, true)
	code, out, errs = floe(t, slices.Concat([]string{"audit", "--table", "lake.customers", "--verify-content", "-b", st.Brokers[0]}, loc)...)
	if code != 0 || !strings.Contains(out, "COMPLETE") {
		t.Fatalf("audit --verify-content: exit %d, want 0 and COMPLETE\n%s\n%s", code, out, errs)
	}
}
