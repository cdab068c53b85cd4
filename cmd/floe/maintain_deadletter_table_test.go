package main

import (
	"slices"
	"strings"
	"testing"
)

// TestMaintainDeadLetterTableSaysNoLedger (from a new-user run): floe
// maintain --table of a dead-letter table said "ledger: every branch and
// tag reads its whole history (nothing to repair)", while every other
// command says a dead-letter table has no ledger of its own.
func TestMaintainDeadLetterTableSaysNoLedger(t *testing.T) {
	_, _, cat, _ := asOfDLSetup(t)
	code, out, errs := floe(t, slices.Concat([]string{"maintain", "--table", "lake.dl_dlq"}, cat)...)
	if code != 0 || strings.Contains(out, "every branch and tag reads its whole history") ||
		!strings.Contains(out, "lake.dl_dlq is the dead-letter table of lake.dl and has no ledger of its own") {
		t.Errorf("maintain of the dead-letter table: exit %d, want 0 and no word of its ledger but that it has none\n%s%s", code, out, errs)
	}
	if code, out, errs := floe(t, slices.Concat([]string{"maintain", "--table", "lake.dl"}, cat)...); code != 0 || !strings.Contains(out, "every branch and tag reads its whole history") {
		t.Errorf("maintain of the data table: exit %d, want 0 and its ledger checked\n%s%s", code, out, errs)
	}
}
