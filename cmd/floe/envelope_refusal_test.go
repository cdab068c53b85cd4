package main

import (
	"slices"
	"testing"

	"github.com/floe-dev/floe/internal/floetest"
)

// TestEnvelopeRefusalNamesBothEnvelopes (a production user's report):
// --envelope debezium with --value and --key into an existing table
// created without an envelope was refused for its mode ("is of mode
// append ... or run with --mode append"), advice --envelope debezium
// refuses. docs/upsert.md promises one line naming both envelopes: the
// refusal names them and the fix (a new table, or the old one dropped),
// with or without --value and --key.
func TestEnvelopeRefusalNamesBothEnvelopes(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(5, 5, 1)
	_, sink, _ := upsertStack(t, topic, 1, c.Records(t, floetest.CDCConnectJSON, ""))
	if code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.plain"})...); code != 0 {
		t.Fatalf("create lake.plain: exit %d\n%s\n%s", code, out, errs)
	}
	want := []string{"table lake.plain keeps its envelope as none, not debezium", "into a new table, --table NEW", "floe drop --table lake.plain --yes"}
	for _, flags := range [][]string{
		{"--envelope", "debezium", "--value", "json", "--key", "json"},
		{"--envelope", "debezium"},
	} {
		refusedOneLine(t, slices.Concat(sink, []string{"--table", "lake.plain"}, flags), want, "--mode", "pass --envelope none")
	}
}
