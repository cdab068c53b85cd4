package main

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/catalog"
)

// TestWhereDeadLetterTableDropped: a JSON table whose offset 1 became a
// dead letter; another engine drops the dead-letter table. floe where for
// offset 1, with and without --brokers, answers no_row, naming the
// dropped table, as as-of and where --key answer: it failed on opening
// the table the ledger names (from a review).
func TestWhereDeadLetterTableDropped(t *testing.T) {
	st, cfg, cat, _ := asOfDLSetup(t)
	c, err := catalog.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.dl_dlq")
	if err := c.DropTable(t.Context(), ident); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--brokers", st.Brokers[0]}} {
		args := append([]string{"where", "--table", "lake.dl", "--partition", "0", "--offset", "1", "--json"}, cat...)
		code, out, errs := floe(t, append(args, extra...)...)
		if code != exitOK || !strings.Contains(out, `"status": "no_row"`) || !strings.Contains(out, "dead-letter table lake.dl_dlq, which no longer exists (dropped)") {
			t.Errorf("where dl/0@1 %v after the dead-letter table was dropped: exit %d; want no_row, naming the dropped table\n%s%s", extra, code, out, errs)
		}
	}
}
