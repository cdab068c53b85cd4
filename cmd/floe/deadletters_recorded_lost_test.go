package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/lookup"
)

// TestDeadLettersRecordedLostNotPending (from a new-user run): once floe
// maintain --drop-missing-dead-letter-files recorded the dead letter of a
// commit as lost (its file deleted from the storage), the audit reports
// dead-letters-lost, but floe dead-letters still called it pending ("no
// dead-letter table holds yet") and floe where called offset 1 pending
// too. Both say the dead letter was recorded lost, as the audit does.
func TestDeadLettersRecordedLostNotPending(t *testing.T) {
	_, cfg, cat, _ := asOfDLSetup(t)
	loseDeadLetterFile(t, cfg, cat)

	code, out, errs := floe(t, slices.Concat([]string{"dead-letters", "--table", "lake.dl", "--json"}, cat)...)
	var dl lookup.DeadLettersResult
	if code != 0 || json.Unmarshal([]byte(out), &dl) != nil {
		t.Fatalf("dead-letters: exit %d\n%s%s", code, out, errs)
	}
	notes := strings.Join(dl.Notes, "\n")
	if dl.Counted != 1 || dl.Matched != 0 || strings.Contains(notes, "pending") ||
		!strings.Contains(notes, "recorded as lost by floe maintain --drop-missing-dead-letter-files") || !strings.Contains(notes, "dead-letters-lost") {
		t.Errorf("dead-letters: counted %d, matched %d, notes:\n%s\nwant 1 counted, none matched, and a note of the dead letter recorded lost, not pending", dl.Counted, dl.Matched, notes)
	}
	code, out, errs = floe(t, slices.Concat([]string{"where", "--table", "lake.dl", "--partition", "0", "--offset", "1", "--json"}, cat)...)
	var w lookup.WhereResult
	if code != 0 || json.Unmarshal([]byte(out), &w) != nil {
		t.Fatalf("where: exit %d\n%s%s", code, out, errs)
	}
	if w.Status != lookup.StatusNoRow || strings.Contains(w.Explanation, "pending") ||
		!strings.Contains(w.Explanation, "recorded as lost by floe maintain --drop-missing-dead-letter-files") || !strings.Contains(w.Explanation, "dead-letters-lost") {
		t.Errorf("where offset 1: %s, kind %q: %s\nwant no_row, saying its dead letter was recorded lost, not pending", w.Status, w.Kind, w.Explanation)
	}
}
