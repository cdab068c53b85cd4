package main

import (
	"slices"
	"strings"
	"testing"
)

// TestDebeziumKeyFieldChangedReason (from a new-user run): a Debezium
// event whose key has another field than the table's key column (key
// {"cust_id":3} on a table keyed by id, after the source's primary key
// changed) was a dead letter "the key has no value for its field id, a
// key column of the table", naming neither the field the key has nor the
// likely cause. The reason names the key's fields, the table's key
// columns, and what to do.
func TestDebeziumKeyFieldChangedReason(t *testing.T) {
	const topic = "dbz.pkrenamed"
	d := &dbzTable{topic: topic, keyFields: []dbzField{{"id", `{"type":"int32","optional":false}`}}, valueFields: []dbzField{{"v", `{"type":"string","optional":true}`}}}
	d.upsert(0, "c", map[string]any{"id": 1}, map[string]any{"v": "a"})
	d.upsert(0, "c", map[string]any{"id": 2}, map[string]any{"v": "b"})
	d.keyFields = []dbzField{{"cust_id", `{"type":"int32","optional":false}`}}
	d.upsert(0, "c", map[string]any{"cust_id": 3}, map[string]any{"v": "c"})
	_, sink, loc := upsertStack(t, topic, 1, d.recs)
	code, out, errs := floe(t, append(sink, "--table", "lake.pkrenamed", "--envelope", "debezium", "--key", "json", "--value", "json")...)
	if code != 0 || !strings.Contains(out, "1 dead letter") {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	out = mustFloe(t, slices.Concat([]string{"dead-letters", "--table", "lake.pkrenamed"}, loc)...)
	for _, want := range []string{"the key has the field cust_id", "the table is keyed by id", "primary key may have changed", "into a new topic"} {
		if !strings.Contains(out, want) {
			t.Errorf("floe dead-letters does not say %q:\n%s", want, out)
		}
	}
}

// TestDebeziumNullKeyAdvice (from a new-user run): a Debezium insert with
// a null Kafka key (a source table without a primary key) was a dead
// letter advising "produce it with a key, or sink the topic into an append
// table", though --envelope debezium refuses --mode append. The reason
// says why Debezium wrote no key and how to give the table one.
func TestDebeziumNullKeyAdvice(t *testing.T) {
	const topic = "dbz.nokey"
	d := &dbzTable{topic: topic, keyFields: []dbzField{{"id", `{"type":"int32","optional":false}`}}, valueFields: []dbzField{{"v", `{"type":"string","optional":true}`}}}
	d.upsert(0, "c", map[string]any{"id": 1}, map[string]any{"v": "a"})
	d.upsert(0, "c", map[string]any{"id": 2}, map[string]any{"v": "b"})
	d.recs[1].Key = nil
	_, sink, loc := upsertStack(t, topic, 1, d.recs)
	code, out, errs := floe(t, append(sink, "--table", "lake.nokey", "--envelope", "debezium", "--key", "json", "--value", "json")...)
	if code != 0 || !strings.Contains(out, "1 dead letter") {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	out = mustFloe(t, slices.Concat([]string{"dead-letters", "--table", "lake.nokey"}, loc)...)
	for _, want := range []string{"the change event has no key", "primary key", "message.key.columns", "incremental snapshot"} {
		if !strings.Contains(out, want) {
			t.Errorf("floe dead-letters does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "append table") {
		t.Errorf("floe dead-letters advises an append table, which --envelope debezium refuses:\n%s", out)
	}
}
