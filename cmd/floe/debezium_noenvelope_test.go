package main

import (
	"encoding/json"
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
			"the records are Debezium change events (op, after and source at payload)"},
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

// TestDebeziumEventsWarnedWhateverValue (from a new-user run): floe sink
// -t dbserver3.inventory.products --table lake.px --mode upsert
// --stop-at-end (raw values) exited 0 without a word, with a table keyed by
// the whole key bytes whose rows were the events; with --key string
// --value json the warning said "each event is appended as it is" of an
// upsert table. The sink looks at a session's first records whatever
// --value is, warns once in words for the table's mode, naming the flags
// that mirror the source table and floe drop of this one, and the summary
// (text and --json) says it again; --envelope none silences it.
func TestDebeziumEventsWarnedWhateverValue(t *testing.T) {
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	const topic = "dbserver3.inventory.products"
	if err := localstack.CreateTopic(t.Context(), st.Brokers, topic, 1, nil); err != nil {
		t.Fatal(err)
	}
	cust := floetest.NewCustomers(topic, 1)
	cust.Story(5, 10, 3)
	if err := localstack.Produce(t.Context(), st.Brokers, cust.Records(t, floetest.CDCPlainJSON, st.Registry)); err != nil {
		t.Fatal(err)
	}
	const (
		events   = "the records are Debezium change events (op, after and source at the top level)"
		upsert   = "each key's row is its latest event as it is, not the source table's row, and a delete event is a row like the others"
		appended = "each event is appended as it is and deletes delete nothing"
		fix      = "sink the topic with --envelope debezium --value json --key json into a new table"
	)
	for _, c := range []struct {
		table string
		flags []string
		want  []string // in the warning; none: no warning
	}{
		{"lake.px", []string{"--mode", "upsert"}, []string{events, upsert, fix, "floe drop --table lake.px"}},
		{"lake.json_events", []string{"--mode", "upsert", "--key", "string", "--value", "json"}, []string{events, upsert, fix, "floe drop --table lake.json_events"}},
		{"lake.append_events", nil, []string{events, appended, fix, "floe drop --table lake.append_events"}},
		{"lake.none_events", []string{"--mode", "upsert", "--envelope", "none"}, nil},
	} {
		args := slices.Concat([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", topic, "--table", c.table, "--stop-at-end"}, c.flags, loc)
		code, out, errs := floe(t, args...)
		warned := strings.Count(errs, "Debezium change events (op")
		switch {
		case code != exitOK:
			t.Errorf("%s: exit %d\n%s\n%s", c.table, code, out, errs)
		case c.want == nil && (warned != 0 || strings.Contains(out, "warning:")):
			t.Errorf("%s with --envelope none: warned\n%s\n%s", c.table, out, errs)
		case c.want != nil && (warned != 1 || !strings.Contains(out, "\nwarning: "+events)):
			t.Errorf("%s: %d warnings in the log, want 1, and the summary's:\n%s\n%s", c.table, warned, out, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) || !strings.Contains(out, w) {
				t.Errorf("%s: the log and the summary do not both say %q:\n%s\n%s", c.table, w, out, errs)
			}
		}
		if c.want != nil && strings.Contains(errs, appended) == (c.want[1] == upsert) {
			t.Errorf("%s: the warning is worded for the other mode:\n%s", c.table, errs)
		}
	}
	// --json carries it too.
	out := mustFloe(t, slices.Concat([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", topic, "--table", "lake.pjson", "--stop-at-end", "--json"}, loc)...)
	var r struct{ Warnings []string }
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Warnings) != 1 || !strings.HasPrefix(r.Warnings[0], events) {
		t.Errorf("--json: %v %+v\n%s", err, r, out)
	}
}
