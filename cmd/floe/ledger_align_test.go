package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/floetest"
)

// TestLedgerPartitionsAligned (from a new-user run): floe ledger's
// partition table gave the partition a 12-character column, so that a
// long topic's (dbserver1.inventory.customers/0) pushed its numbers out
// from under their headings. Every row's columns start where the
// heading's do.
func TestLedgerPartitionsAligned(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 2)
	c.Story(5, 5, 1)
	_, sink, loc := upsertStack(t, topic, 2, c.Records(t, floetest.CDCConnectJSON, ""))
	mustFloe(t, slices.Concat(sink, []string{"--table", "lake.dbz", "--envelope", "debezium", "--value", "json", "--key", "json"})...)
	out := mustFloe(t, slices.Concat([]string{"ledger", "--table", "lake.dbz"}, loc)...)
	_, table, ok := strings.Cut(out, "\nPARTITION")
	if !ok {
		t.Fatalf("no partition table:\n%s", out)
	}
	lines := strings.Split("PARTITION"+table, "\n")
	cells := regexp.MustCompile(`\S+`)
	head := cells.FindAllStringIndex(lines[0], -1)
	rows := 0
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, topic+"/") {
			continue
		}
		rows++
		got := cells.FindAllStringIndex(l, -1)
		if len(got) != len(head) {
			t.Fatalf("row %q has %d cells, the heading %d", l, len(got), len(head))
		}
		for i := range head {
			if got[i][0] != head[i][0] {
				t.Errorf("row %q: cell %d starts at %d, its heading at %d\n%s", l, i, got[i][0], head[i][0], out)
				break
			}
		}
	}
	if rows != 2 {
		t.Fatalf("want 2 partition rows:\n%s", out)
	}
}
