package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDebeziumFlagsRefusedLeaveNothing (from a new-user run): floe sink
// --on-truncate delete-all into a new table without --envelope debezium
// was refused (exit 2) once the table existed, and floe status listed it
// after. Every Debezium setting a table without the envelope cannot take
// is refused before the table, its dead-letter table or a replay's branch
// is created.
func TestDebeziumFlagsRefusedLeaveNothing(t *testing.T) {
	const topic = "customers"
	st, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, []byte(`{"id":1}`), []byte(`{"id":1,"name":"Ann"}`), 0)})
	refused := func(args []string, want string, absent ...string) {
		t.Helper()
		code, out, errs := floe(t, args...)
		if code != exitError || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || out != "" {
			t.Errorf("floe %v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", args, code, out, errs, want)
		}
		for _, name := range absent {
			if replayTableExists(t, st, name) {
				t.Errorf("floe %v: the refused run created %s", args, name)
			}
		}
	}
	// (Sunk first, which creates the catalog, whose creation is logged.)
	if code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.typed", "--value", "json"})...); code != 0 {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	truncate := `--on-truncate "delete-all": want it only for a table of Debezium change events`
	placeholder := `--unavailable-placeholder "-": want it only for a table of Debezium change events`
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--on-truncate", "delete-all"}, truncate},
		{[]string{"--on-truncate", "delete-all", "--value", "json", "--key", "json", "--mode", "upsert"}, truncate},
		{[]string{"--unavailable-placeholder", "-", "--value", "json"}, placeholder},
	} {
		refused(slices.Concat(sink, []string{"--table", "lake.c11"}, c.args), c.want, "lake.c11", "lake.c11_dlq")
		refused(slices.Concat([]string{"replay", "-b", st.Brokers[0], "-t", topic, "--table", "lake.r11"}, loc, c.args), c.want, "lake.r11", "lake.r11_dlq")
	}

	// Into lake.typed, which exists without the envelope: no dead-letter
	// table is created for it, no branch made.
	refused(slices.Concat(sink, []string{"--table", "lake.typed", "--dlq-table", "lake.typed_other", "--on-truncate", "delete-all"}), truncate, "lake.typed_other")
	refused(slices.Concat(sink, []string{"--table", "lake.typed", "--dlq-table", "lake.typed_other", "--unavailable-placeholder", "-"}), placeholder, "lake.typed_other")
	refused(slices.Concat([]string{"replay", "-b", st.Brokers[0], "-t", topic, "--table", "lake.typed", "--branch", "b"}, loc, []string{"--on-truncate", "delete-all"}), truncate, "lake.typed_b_dlq")
	if openTable(t, st.Catalog(), "lake.typed").HasBranch("b") {
		t.Error("the refused replay made branch b")
	}
}

// TestRegistryTableWithoutRegistryLeavesNothing: a sink into an existing
// table of --value registry without --schema-registry was refused only
// once its sink was made, after the dead-letter table it names was
// created. It is refused before.
func TestRegistryTableWithoutRegistryLeavesNothing(t *testing.T) {
	const topic = "customers"
	st, sink, _ := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, []byte(`{"id":1}`), []byte(`{"id":1,"name":"Ann"}`), 0)})
	// Plain JSON: a dead letter, exit 3, and the table exists.
	if code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.reg", "--value", "registry", "--schema-registry", st.Registry})...); code != exitOnlyDeadLetters {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.reg", "--dlq-table", "lake.reg_other"})...)
	if code != exitError || !strings.Contains(errs, "table lake.reg decodes values in the registry's wire format") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 naming the registry", code, out, errs)
	}
	if replayTableExists(t, st, "lake.reg_other") {
		t.Error("the refused run created lake.reg_other")
	}
}
