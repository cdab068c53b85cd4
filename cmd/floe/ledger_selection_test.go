package main

import (
	"strings"
	"testing"
)

// TestLedgerUnknownSelection: floe ledger --topic or --partition naming
// nothing the ledger holds (a misspelt topic) printed an empty ledger
// ending "0 shown of N commits, 0 rows in the ledger", exit 0: a table of
// 300 rows said to have none. It is refused, naming what the ledger holds,
// as floe audit --topic is.
func TestLedgerUnknownSelection(t *testing.T) {
	st, loc := sinkStack(t) // orders: 3 partitions, 300 events
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	ledger := append([]string{"ledger", "--table", "lake.orders"}, loc...)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--topic", "ordrs"}, "orders"},
		{[]string{"--partition", "7"}, "0, 1, 2"},
	} {
		for _, json := range []bool{false, true} {
			args := append(append([]string{}, ledger...), c.args...)
			if json {
				args = append(args, "--json")
			}
			code, out, errs := floe(t, args...)
			if code != exitError || !strings.Contains(errs, c.want) {
				t.Errorf("floe ledger %v: exit %d, want 2 naming %q\nstdout:\n%s\nstderr:\n%s", c.args, code, c.want, out, errs)
			}
		}
	}
}
