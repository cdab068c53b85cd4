package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
)

// refusedOneLine runs floe with args and fails t unless it exits 2 with
// one line on stderr containing every one of want and none of not.
func refusedOneLine(t *testing.T, args []string, want []string, not ...string) {
	t.Helper()
	code, out, errs := floe(t, args...)
	ok := code == exitError && out == "" && strings.Count(strings.TrimSpace(errs), "\n") == 0
	for _, w := range want {
		ok = ok && strings.Contains(errs, w)
	}
	for _, n := range not {
		ok = ok && !strings.Contains(errs, n)
	}
	if !ok {
		t.Errorf("floe %v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q, not %q", args, code, out, errs, want, not)
	}
}

// TestIDColumnsJudgedByExistingTable (from a new-user run): --id-columns
// without --mode into an existing upsert table said "add --mode upsert",
// though a later run may leave --mode out; with it, the real refusal
// came (the table keeps its key). An existing table judges the flag by
// its own mode and key: the table's key is taken, another is refused
// naming it at once, and an append table says it is one.
func TestIDColumnsJudgedByExistingTable(t *testing.T) {
	const topic = "customers"
	st, sink, _ := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, []byte(`{"id":1}`), []byte(`{"id":1,"name":"Ann"}`), 0)})
	for _, create := range [][]string{
		{"--table", "lake.bykey", "--mode", "upsert", "--key", "json", "--value", "json"},
		{"--table", "lake.byid", "--mode", "upsert", "--value", "json", "--id-columns", "id"},
		{"--table", "lake.plain", "--value", "json"},
	} {
		if code, out, errs := floe(t, slices.Concat(sink, create)...); code != 0 {
			t.Fatalf("create %v: exit %d\n%s\n%s", create, code, out, errs)
		}
	}
	refusedOneLine(t, slices.Concat(sink, []string{"--table", "lake.bykey", "--id-columns", "id"}),
		[]string{"table lake.bykey is keyed by the key's fields id", "an upsert table keeps the key it was created with"}, "add --mode upsert")
	if code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.byid", "--id-columns", "id"})...); code != 0 {
		t.Errorf("--id-columns id into lake.byid, keyed by it, without --mode: exit %d\n%s\n%s", code, out, errs)
	}
	refusedOneLine(t, slices.Concat(sink, []string{"--table", "lake.byid", "--id-columns", "name"}),
		[]string{"an upsert table keeps the key it was created with"}, "add --mode upsert")
	refusedOneLine(t, slices.Concat(sink, []string{"--table", "lake.plain", "--id-columns", "id"}),
		[]string{"table lake.plain is of mode append, and --id-columns id keys an upsert table"}, "add --mode upsert")
	refusedOneLine(t, slices.Concat(sink, []string{"--table", "lake.newid", "--value", "json", "--id-columns", "id"}),
		[]string{"--id-columns id keys an upsert table: add --mode upsert"})
	if replayTableExists(t, st, "lake.newid") {
		t.Error("the refused run created lake.newid")
	}
}

// TestEnvelopeJudgedByExistingTable (from a new-user run): --envelope
// debezium without --value and --key into an existing table created
// without the envelope said that the envelope needs them; only with them
// added came the table's answer (it keeps its envelope as none). An
// existing table answers first: one of another envelope refuses it naming
// its own, a Debezium table takes the flag alone (its modes are its own),
// and a new table still needs the modes, refused before it is created.
func TestEnvelopeJudgedByExistingTable(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(5, 5, 1)
	st, sink, _ := upsertStack(t, topic, 1, c.Records(t, floetest.CDCConnectJSON, ""))
	json := []string{"--value", "json", "--key", "json"}
	for _, create := range [][]string{
		{"--table", "lake.dbz_noenv"},
		slices.Concat([]string{"--table", "lake.dbz", "--envelope", "debezium"}, json),
	} {
		if code, out, errs := floe(t, slices.Concat(sink, create)...); code != 0 {
			t.Fatalf("create %v: exit %d\n%s\n%s", create, code, out, errs)
		}
	}
	refusedOneLine(t, slices.Concat(sink, []string{"--table", "lake.dbz_noenv", "--envelope", "debezium"}),
		[]string{"table lake.dbz_noenv keeps its envelope as none, not debezium"}, "needs --value and --key")
	if code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.dbz", "--envelope", "debezium"})...); code != 0 {
		t.Errorf("--envelope debezium alone into a Debezium table: exit %d\n%s\n%s", code, out, errs)
	}
	refusedOneLine(t, slices.Concat(sink, []string{"--table", "lake.dbz_new", "--envelope", "debezium", "--value", "json"}),
		[]string{"--envelope debezium needs --value and --key"})
	if replayTableExists(t, st, "lake.dbz_new") {
		t.Error("the refused run created lake.dbz_new")
	}
}

// TestEnvelopeNoneRefusedByDebeziumTable (from a new-user run): floe sink
// --envelope none into a Debezium table sank the events as Debezium's,
// exit 0, where docs/upsert.md says a flag that differs from the table's
// envelope is refused naming both. --envelope none alone is refused by a
// Debezium table, and taken by a table without an envelope.
func TestEnvelopeNoneRefusedByDebeziumTable(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(5, 5, 1)
	_, sink, _ := upsertStack(t, topic, 1, c.Records(t, floetest.CDCConnectJSON, ""))
	for _, create := range [][]string{
		{"--table", "lake.plain"},
		{"--table", "lake.dbz", "--envelope", "debezium", "--value", "json", "--key", "json"},
	} {
		if code, out, errs := floe(t, slices.Concat(sink, create)...); code != 0 {
			t.Fatalf("create %v: exit %d\n%s\n%s", create, code, out, errs)
		}
	}
	refusedOneLine(t, slices.Concat(sink, []string{"--table", "lake.dbz", "--envelope", "none"}),
		[]string{"table lake.dbz keeps its envelope as debezium, not none"})
	if code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.plain", "--envelope", "none"})...); code != 0 {
		t.Errorf("--envelope none into a table without an envelope: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestEnvelopeLeftOutIsTheTables (from a new-user run): a sink of a
// Debezium table with --value json --key json and no --envelope was
// refused ("keeps its envelope as debezium, not none"), and --value
// registry alone got the same envelope refusal, where docs/upsert.md says
// a later run may leave --envelope out. A run that does not give
// --envelope takes the table's, and the value and key modes it gives are
// judged as the table's; --envelope none, given, is still refused.
func TestEnvelopeLeftOutIsTheTables(t *testing.T) {
	const topic = "dbz.inv.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(5, 5, 1)
	st, sink, _ := upsertStack(t, topic, 1, c.Records(t, floetest.CDCConnectJSON, ""))
	into := slices.Concat(sink, []string{"--table", "lake.dbz_customers"})
	if code, out, errs := floe(t, slices.Concat(into, []string{"--envelope", "debezium", "--value", "json", "--key", "json"})...); code != 0 {
		t.Fatalf("create: exit %d\n%s\n%s", code, out, errs)
	}
	for _, flags := range [][]string{{"--value", "json", "--key", "json"}, {"--value", "json"}, nil} {
		if code, out, errs := floe(t, slices.Concat(into, flags)...); code != 0 {
			t.Errorf("floe sink %v into the Debezium table: exit %d\n%s\n%s", flags, code, out, errs)
		}
	}
	refusedOneLine(t, slices.Concat(into, []string{"--value", "registry", "--schema-registry", st.Registry}),
		[]string{"table lake.dbz_customers keeps its values as json, not registry"}, "envelope")
	refusedOneLine(t, slices.Concat(into, []string{"--key", "string"}),
		[]string{"table lake.dbz_customers keeps its keys as json, not string"}, "envelope")
	refusedOneLine(t, slices.Concat(into, []string{"--envelope", "none", "--value", "json", "--key", "json"}),
		[]string{"table lake.dbz_customers keeps its envelope as debezium, not none"})
}
