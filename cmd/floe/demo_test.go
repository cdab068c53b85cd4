package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoCommand runs the README's first command end to end and checks
// each step's headline, then that a reused --dir is refused.
func TestDemoCommand(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := floe(t, "demo", "--dir", dir, "--events", "600")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	for _, want := range []string{
		"a committed transaction of 40 and an aborted one of 25",
		"sink --stop-at-end:",
		"resumed from the ledger and added 200 rows",
		"verdict: COMPLETE",
		"ledger lost payments/0 [100, 150)",
		"EQUAL",
		"first snapshot covering those positions",
		"but has no row: it is a",
		"folded",
		"400 rows and 3 dead letters (into lake.shipments_dlq)",
		"carrier string",
		"does not have schema 9999",
		"3 dead letters (verified against",
		"the HTML report of this audit, to open in a browser or print:\n    " + filepath.Join(dir, "payments-audit.html"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "payments-audit.html"))
	if err != nil || !strings.Contains(string(page), "NOT COMPLETE") || !strings.Contains(string(page), `data-kind="lost" data-low="100" data-high="150"`) {
		t.Errorf("the demo's HTML report (%v) does not show the loss [100, 150):\n%.500s", err, page)
	}
	code, _, errs = floe(t, "demo", "--dir", dir, "--events", "600")
	if code != 2 || !strings.Contains(errs, "already holds a demo's catalog") {
		t.Fatalf("second demo in the same folder: exit %d, %q", code, errs)
	}
}
