package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun: a file of BenchmarkCommitLatency's lines becomes a well-formed
// SVG with a latency and a metadata line per run, and a summary with the
// medians of the first and last tenth.
func TestRun(t *testing.T) {
	var b strings.Builder
	b.WriteString("mode,maintain,commit,commit_ms,metadata_bytes,snapshots\n")
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&b, "live,true,%d,%d,%d,%d\n", i, 10+i%3, 1000*min(i, 20), min(i, 20))
		fmt.Fprintf(&b, "live,false,%d,%d,%d,%d\n", i, 10+i, 1000*i, i)
	}
	svg, summary := plot(t, b.String())
	d := xml.NewDecoder(strings.NewReader(svg))
	lines := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	if lines != 4 {
		t.Fatalf("%d polylines, want 4 (latency and metadata.json of 2 runs)", lines)
	}
	// Maintenance off: 11..20 ms over the first tenth, 101..110 ms over
	// the last.
	for _, want := range []string{"live, maintenance on", "median first 10:    16.0 ms  last 10:   106.0 ms"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
}

// TestRunFresh: where the file has fresh tables' commits, the summary puts
// last / first against theirs (a load that doubles latency everywhere reads
// x1.00) and the SVG draws them as a dashed line.
func TestRunFresh(t *testing.T) {
	var b strings.Builder
	b.WriteString("mode,maintain,commit,commit_ms,metadata_bytes,snapshots,fresh_ms\n")
	for i := 1; i <= 100; i++ {
		load := 1
		if i > 50 { // the machine's load doubles halfway
			load = 2
		}
		fresh := ""
		if i%10 == 0 {
			fresh = fmt.Sprint(5 * load)
		}
		fmt.Fprintf(&b, "bounded,true,%d,%d,%d,%d,%s\n", i, 10*load, 1000, 20, fresh)
	}
	svg, summary := plot(t, b.String())
	if want := "(x2.00, x1.00 vs a fresh table)"; !strings.Contains(summary, want) {
		t.Errorf("summary lacks %q:\n%s", want, summary)
	}
	if !strings.Contains(svg, `stroke-dasharray`) || !strings.Contains(svg, "dashed: fresh tables, x1.00 vs a fresh table") {
		t.Errorf("no dashed line of the fresh tables' commits:\n%s", svg)
	}
}

// plot runs the command on a file of the given lines and returns the SVG it
// drew and the summary it printed.
func plot(t *testing.T, csv string) (svg, summary string) {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "lat.csv"), filepath.Join(dir, "lat.svg")
	if err := os.WriteFile(in, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	var sum bytes.Buffer
	if err := run(out, []string{in}, &sum); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), sum.String()
}

// TestRunSoak: BenchmarkSoak's samples become an SVG of a panel per
// measure with a line per file, and a summary of each measure's second
// and last sample and their ratio.
func TestRunSoak(t *testing.T) {
	var b strings.Builder
	b.WriteString("commit,rss_mib,commit_ms,metadata_bytes,live_files,snapshots,archive_bytes\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "%d,%d,%d,%d,%d,%d,%d\n", 1000*i, 100, 20+2*i, 102400, 200*i, 101, 1024*i)
	}
	svg, summary := plot(t, b.String())
	if n := strings.Count(svg, "<polyline"); n != 5 {
		t.Errorf("%d polylines, want 5 (RSS, latency, metadata.json, live files, archive)", n)
	}
	for _, want := range []string{"10000 commits", "sink RSS, MiB 100 at 2000 -> 100 (x1.00)", "median commit latency, ms 24 at 2000 -> 40 (x1.67)",
		"live data files 400 at 2000 -> 2000 (x5.00)", "metadata.json, KiB 100 at 2000 -> 100 (x1.00)"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
}

// TestRunSoakZeroFirst: a measure whose first sample is 0 (a run whose
// ledger archive stays empty) prints its values without a ratio, where it
// printed xNaN (0 -> 0) or x+Inf.
func TestRunSoakZeroFirst(t *testing.T) {
	var b strings.Builder
	b.WriteString("commit,rss_mib,commit_ms,metadata_bytes,live_files,snapshots,archive_bytes\n")
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&b, "%d,%d,%d,%d,%d,%d,%d\n", 250*i, 100, 20, 102400, 200*i, 101, 0)
	}
	_, summary := plot(t, b.String())
	if want := "ledger archive, KiB 0 at 500 -> 0\n"; !strings.Contains(summary, want) {
		t.Errorf("summary lacks %q:\n%s", want, summary)
	}
	if strings.Contains(summary, "NaN") || strings.Contains(summary, "Inf") {
		t.Errorf("summary has a ratio of 0:\n%s", summary)
	}
}
