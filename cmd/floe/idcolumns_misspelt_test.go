package main

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMisspeltIDColumnsNamesDrop (from a new-user run): a sink with a
// misspelt --id-columns created the table and its dead-letter table, every
// record a dead letter (exit 3), and the run again with the right columns
// was refused with "sink into a new table", leaving the empty table
// behind. A table without rows refused for its key names floe drop, as the
// envelope's refusal does.
func TestMisspeltIDColumnsNamesDrop(t *testing.T) {
	const topic = "people"
	_, sink, _ := upsertStack(t, topic, 1, []*kgo.Record{rec(topic, 0, nil, []byte(`{"tenant":"a","id":1,"name":"Ann"}`), 0)})
	into := slices.Concat(sink, []string{"--table", "lake.people2", "--mode", "upsert", "--value", "json"})
	if code, out, errs := floe(t, slices.Concat(into, []string{"--id-columns", "tenant,idd"})...); code != exitOnlyDeadLetters {
		t.Fatalf("misspelt --id-columns: exit %d, want %d\n%s\n%s", code, exitOnlyDeadLetters, out, errs)
	}
	refusedOneLine(t, slices.Concat(into, []string{"--id-columns", "tenant,id"}),
		[]string{"table lake.people2 is keyed by --id-columns tenant,idd", "floe drop --table lake.people2 --yes"})
}
