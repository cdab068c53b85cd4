package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestDebeziumEventsSunkWithoutEnvelopeWarned (from a new-user run): a
// topic of Debezium change events sunk as a typed append table, without
// --envelope debezium, exited 0 with a table of events (schema and
// payload columns) and many dead letters, and nothing said why. The sink
// warns that the columns are change events and names --envelope debezium;
// a sink with the envelope does not.
func TestDebeziumEventsSunkWithoutEnvelopeWarned(t *testing.T) {
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	for _, c := range []struct {
		name  string
		enc   floetest.CDCEncoding
		flags []string
		code  int
		want  string
	}{
		// Kafka Connect's JSON events with schemas clash with each other:
		// every one is a dead letter, and the exit says why.
		{"connectjson", floetest.CDCConnectJSON, []string{"--value", "json", "--key", "json"}, exitOnlyDeadLetters,
			"the records that became dead letters are Debezium change events (op, after and source at payload)"},
		{"avro", floetest.CDCAvro, []string{"--value", "registry", "--key", "registry", "--schema-registry", st.Registry}, exitOK,
			"the table's columns are Debezium change events (op, after and source at the top level)"},
	} {
		topic := "dbserver1.inventory." + c.name
		if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 1, nil); err != nil {
			t.Fatal(err)
		}
		cust := floetest.NewCustomers(topic, 1)
		cust.Story(5, 10, 3)
		if err := localstack.Produce(t.Context(), st.Brokers, cust.Records(t, c.enc, st.Registry)); err != nil {
			t.Fatal(err)
		}
		sink := func(table string, more ...string) (int, string) {
			code, _, errs := floe(t, slices.Concat([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", topic, "--table", table, "--stop-at-end"}, c.flags, more, loc)...)
			return code, errs
		}
		code, errs := sink("lake." + c.name + "_events")
		if code != c.code || !strings.Contains(errs, c.want) || strings.Count(errs, "Debezium change events (op") != 1 {
			t.Errorf("%s without --envelope: exit %d\n%s\nwant exit %d and one warning containing %q", c.name, code, errs, c.code, c.want)
		}
		if final := "no record became a row; the records are Debezium change events, decoded without --envelope debezium"; c.code == exitOnlyDeadLetters && !strings.Contains(errs, final) {
			t.Errorf("%s without --envelope: the last line does not say %q:\n%s", c.name, final, errs)
		}
		if code, errs := sink("lake."+c.name, "--envelope", "debezium"); code != exitOK || strings.Contains(errs, "Debezium change events (op") {
			t.Errorf("%s with --envelope debezium: exit %d\n%s\nwant no warning", c.name, code, errs)
		}
	}
}
