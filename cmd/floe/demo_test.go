package main

import (
	"os"
	"path/filepath"
	"regexp"
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
	if strings.Contains(errs, "level=") {
		t.Errorf("the demo logged into its story:\n%s", errs)
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
		"11 upserts and 4 deletes (each delete event and its tombstone",
		"--envelope debezium --key json --value json",
		"upsert table (key key:id)",
		`key {"id":3} in lake.customers: deleted`,
		"the HTML report of this audit, to open in a browser or print:\n    " + filepath.Join(dir, "payments-audit.html"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// The customers: six left (3 and 7 deleted, 2 and 6 updated), and the
	// upsert table's audit is complete.
	if i := strings.Index(out, "Upsert tables."); i < 0 ||
		!regexp.MustCompile(`\n  2\s+George B\. Bailey\s+george\.bailey@bedford\.com\s+US\s+u\s`).MatchString(out[i:]) ||
		strings.Contains(out[i:], "Edward") || strings.Contains(out[i:], "Kenji") || strings.Count(out[i:], "verdict: COMPLETE") != 1 {
		t.Errorf("the upsert step's customers or audit:\n%s", out[max(i, 0):])
	}
	page, err := os.ReadFile(filepath.Join(dir, "payments-audit.html"))
	if err != nil || !strings.Contains(string(page), "NOT COMPLETE") || !strings.Contains(string(page), `data-kind="lost" data-low="100" data-high="150"`) {
		t.Errorf("the demo's HTML report (%v) does not show the loss [100, 150):\n%.500s", err, page)
	}
	code, _, errs = floe(t, "demo", "--dir", dir, "--events", "600")
	if code != 2 || !strings.Contains(errs, "is not empty: it holds") || !strings.Contains(errs, "its catalog.db holds ledgers of another stack's log") {
		t.Fatalf("second demo in the same folder: exit %d, %q", code, errs)
	}
}

// TestDemoKeepsItsReport: without --dir the demo keeps its folder, with the
// HTML report beside the catalog and warehouse it describes, and says so,
// so that the report's re-verify steps can be followed: an audit of the
// kept table has the report's evidence digest. (The report used to stay
// in the temporary folder, pointing at a warehouse the demo had removed.)
func TestDemoKeepsItsReport(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	code, out, errs := floe(t, "demo", "--events", "600")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	m := regexp.MustCompile(`the demo's catalog, warehouse and HTML report stay in (\S+) \(rm -r it when done\);\nthe report's re-verify steps run against them with --catalog (\S+)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo does not say where its folder stays:\n%s", out)
	}
	dir, cat := m[1], m[2]
	page, err := os.ReadFile(filepath.Join(dir, "payments-audit.html"))
	if err != nil || !strings.Contains(out, "\n    "+filepath.Join(dir, "payments-audit.html")+"\n") {
		t.Fatalf("the report is not in the kept folder %s: %v", dir, err)
	}
	// The report's own re-verify command, run as it reads (it names the
	// demo's catalog: without it the command looked in ./floe-data).
	cmd := regexp.MustCompile(`<pre>floe (audit --table \S+ --catalog \S+ --branch main --metadata-location \S+ --json) &gt; audit.json`).FindStringSubmatch(string(page))
	if cmd == nil || !strings.Contains(cmd[1], "--catalog "+cat+" ") {
		t.Fatalf("the report's re-verify command does not name the demo's catalog %s: %v", cat, cmd)
	}
	code, js, errs := floe(t, strings.Fields(cmd[1])...)
	doc := decodeAudit(t, js)
	if code != exitFindings || doc.Evidence.Digest == "" || !strings.Contains(string(page), doc.Evidence.Digest) {
		t.Fatalf("re-verify against the kept folder: exit %d, digest %q in the report: %v\n%s", code, doc.Evidence.Digest, strings.Contains(string(page), doc.Evidence.Digest), errs)
	}
}

// TestDemoEventsBounded: --events below 1 panicked (a negative capacity),
// and a hundred million ate gigabytes of memory before any step (the
// demo's broker holds the log in memory; from a new-user run). Both are
// usage errors naming the range, before the demo touches its folder.
func TestDemoEventsBounded(t *testing.T) {
	for _, n := range []string{"-5", "0", "100001", "lots"} {
		dir := t.TempDir()
		code, out, errs := floe(t, "demo", "--dir", dir, "--events", n)
		if code != exitError || !strings.Contains(errs, "want a whole number from 1 to 100,000 (the demo's broker keeps every event in memory)") {
			t.Errorf("--events %s: exit %d, stdout %q, stderr %q; want exit 2 naming the range", n, code, out, errs)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("--events %s: the demo wrote into its folder: %v", n, entries)
		}
	}
}

// TestReportCommandRelativeCatalog: an audit run with a relative
// --catalog (or the default one, floe-data/catalog.db, which the report
// does not name at all) writes an HTML report whose re-verify command
// named the catalog as typed: run from another folder, as an auditor
// handed the report would, it found no catalog (from a review). It names
// the SQLite file by its absolute path.
func TestReportCommandRelativeCatalog(t *testing.T) {
	st, _ := shopStack(t)
	cfg := st.Catalog()
	dir := filepath.Dir(cfg.Catalog)
	t.Chdir(dir)
	rel := filepath.Base(cfg.Catalog)
	report := filepath.Join(t.TempDir(), "r.html")
	code, out, errs := floe(t, "audit", "--table", "lake.shop", "--catalog", rel, "--html", report)
	if code == exitError {
		t.Fatalf("audit with --catalog %s in %s: exit %d\n%s\n%s", rel, dir, code, out, errs)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	cmd := regexp.MustCompile(`<pre>floe (audit --table [^&]*) &gt; audit.json`).FindStringSubmatch(string(page))
	if cmd == nil {
		t.Fatalf("no re-verify command in the report")
	}
	t.Chdir(t.TempDir())
	code, _, errs = floe(t, strings.Fields(cmd[1])...)
	if code == exitError {
		t.Fatalf("the report's re-verify command %q, run from another folder, fails (exit %d): %s", cmd[1], code, errs)
	}
}
