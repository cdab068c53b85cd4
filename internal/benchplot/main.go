// Command benchplot draws the per-commit latencies that
// BenchmarkCommitLatency writes (FLOE_BENCH_OUT) as an SVG: commit latency
// (log scale) and metadata.json size against the commit number, one line
// per run (mode, with or without the sink's maintenance), each point the
// median of a bucket of commits; where the file has fresh tables' commits
// (the benchmark's same-run baseline), a dashed line draws them. It prints,
// per run, the median latency of the first and of the last 1,000 commits,
// that ratio against the fresh tables' in the same windows, and the last
// metadata.json size.
//
// Files of BenchmarkSoak's samples (cmd/floe) it draws as panels of the
// sink's RSS, median commit latency, metadata.json size, live data files
// and ledger archive size against the commit number, a line per file.
//
//	go run ./internal/benchplot -o docs/img/commit-latency.svg after.csv before.csv
//	go run ./internal/benchplot -o docs/img/soak.svg compaction.csv no-compaction.csv
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("o", "commit-latency.svg", "the SVG file to write")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: benchplot [-o FILE.svg] LATENCIES.csv...")
		os.Exit(2)
	}
	if err := run(*out, flag.Args(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(2)
	}
}

func run(out string, inputs []string, summary io.Writer) error {
	if isSoak(inputs[0]) {
		return runSoak(out, inputs, summary)
	}
	var all []*series
	for _, in := range inputs {
		s, err := readCSV(in)
		if err != nil {
			return err
		}
		all = append(all, s...)
	}
	if len(all) == 0 {
		return errors.New("no commits in the input")
	}
	for _, s := range all {
		first, last, w := s.medians()
		fmt.Fprintf(summary, "%-28s %6d commits  median first %d: %7.1f ms  last %d: %7.1f ms  (x%.2f%s)  last metadata.json %.0f bytes\n",
			s.name, len(s.ms), w, first, w, last, last/first, s.vsFresh(), s.metadata[len(s.metadata)-1])
	}
	return os.WriteFile(out, []byte(svg(all)), 0o644)
}

// series is one run: per commit, its latency and metadata.json size, and
// the latency of a fresh table's commit sampled after it (0: none).
type series struct {
	name     string
	ms       []float64
	metadata []float64
	fresh    []float64
}

// vsFresh says how last / first compares with the same ratio of the fresh
// tables' commits in those windows, which cancels the machine's load; empty
// without fresh samples in both windows.
func (s *series) vsFresh() string {
	first, last, w := s.medians()
	ff, fl := sampledMedian(s.fresh[:w]), sampledMedian(s.fresh[len(s.fresh)-w:])
	if ff == 0 || fl == 0 {
		return ""
	}
	return fmt.Sprintf(", x%.2f vs a fresh table", (last/fl)/(first/ff))
}

// sampledMedian is the median of the non-zero values of xs, 0 without any.
func sampledMedian(xs []float64) float64 {
	var c []float64
	for _, v := range xs {
		if v > 0 {
			c = append(c, v)
		}
	}
	if len(c) == 0 {
		return 0
	}
	return median(c)
}

// medians returns the median latency of the first and of the last w
// commits, w being 1,000 or a tenth of fewer commits.
func (s *series) medians() (first, last float64, w int) {
	w = max(1, min(1000, len(s.ms)/10))
	return median(s.ms[:w]), median(s.ms[len(s.ms)-w:]), w
}

func median(xs []float64) float64 {
	c := slices.Clone(xs)
	slices.Sort(c)
	return c[len(c)/2]
}

// readCSV reads BenchmarkCommitLatency's lines (mode, maintain, commit,
// commit_ms, metadata_bytes, snapshots and, when sampled, fresh_ms) into
// one series per mode and maintain setting, in commit order.
func readCSV(path string) ([]*series, error) {
	rows, err := readRows(path)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || !slices.Equal(rows[0][:4], []string{"mode", "maintain", "commit", "commit_ms"}) {
		return nil, fmt.Errorf("%s: not a BenchmarkCommitLatency file (want a header mode,maintain,commit,commit_ms,...)", path)
	}
	byName := map[string]*series{}
	var order []*series
	for i, r := range rows[1:] {
		if len(r) < 5 {
			return nil, fmt.Errorf("%s line %d: %d fields, want 5 or more", path, i+2, len(r))
		}
		name := r[0] + ", maintenance " + map[string]string{"true": "on", "false": "off"}[r[1]]
		s := byName[name]
		if s == nil {
			s = &series{name: name}
			byName[name] = s
			order = append(order, s)
		}
		ms, err1 := strconv.ParseFloat(r[3], 64)
		md, err2 := strconv.ParseFloat(r[4], 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+2, err)
		}
		fresh := 0.0
		if len(r) > 6 && r[6] != "" {
			if fresh, err = strconv.ParseFloat(r[6], 64); err != nil {
				return nil, fmt.Errorf("%s line %d: %w", path, i+2, err)
			}
		}
		s.ms = append(s.ms, ms)
		s.metadata = append(s.metadata, md)
		s.fresh = append(s.fresh, fresh)
	}
	return order, nil
}

// readRows reads the CSV file path.
func readRows(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return rows, nil
}

// Layout of the SVG: two panels, one above the other.
const (
	width, panelHeight = 900.0, 300.0
	left, right        = 70.0, 20.0
	top, gap, bottom   = 40.0, 60.0, 50.0
	buckets            = 200
)

var colours = []string{"#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#9467bd", "#8c564b"}

// svg draws both panels for all series.
func svg(all []*series) string {
	maxN := 0
	maxMs, minMs, maxMeta := 0.0, math.Inf(1), 0.0
	for _, s := range all {
		maxN = max(maxN, len(s.ms))
		for _, v := range s.ms {
			maxMs = max(maxMs, v)
			if v > 0 {
				minMs = min(minMs, v)
			}
		}
		maxMeta = max(maxMeta, slices.Max(s.metadata))
	}
	bucket := max(1, maxN/buckets)
	plotW := width - left - right
	height := top + 2*panelHeight + gap + bottom
	x := func(i int) float64 { return left + plotW*float64(i)/float64(maxN) }
	// Latency on a log scale between decades around the data.
	lo, hi := math.Floor(math.Log10(minMs)), math.Ceil(math.Log10(maxMs))
	if hi <= lo {
		hi = lo + 1
	}
	y1 := func(ms float64) float64 {
		return top + panelHeight*(1-(math.Log10(max(ms, math.Pow(10, lo)))-lo)/(hi-lo))
	}
	top2 := top + panelHeight + gap
	metaTop := niceCeil(maxMeta / 1024)
	y2 := func(b float64) float64 { return top2 + panelHeight*(1-b/1024/metaTop) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="15" font-weight="bold">floe commit latency vs commit number (median of every %d commits)</text>`+"\n", left, bucket)
	// Panel 1 grid: 1, 2, 5 per decade.
	for d := lo; d < hi+0.5; d++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, d)
			if math.Log10(v) > hi+1e-9 {
				break
			}
			yy := y1(v)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, width-right, yy)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, trimFloat(v))
		}
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">commit latency, ms (log scale)</text>`+"\n", top+panelHeight/2)
	// Panel 2 grid.
	for i := 0; i <= 4; i++ {
		v := metaTop * float64(i) / 4
		yy := top2 + panelHeight*(1-float64(i)/4)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, yy, width-right, yy)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle">metadata.json, KiB</text>`+"\n", top2+panelHeight/2)
	// X axis ticks on both panels.
	step := niceCeil(float64(maxN) / 10)
	for v := 0.0; v <= float64(maxN); v += step {
		for _, base := range []float64{top + panelHeight, top2 + panelHeight} {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", x(int(v)), base, x(int(v)), base+5)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(int(v)), base+18, int(v))
		}
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">commit number</text>`+"\n", left+plotW/2, height-10)
	for _, base := range []float64{top, top2} {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", left, base, plotW, panelHeight)
	}
	for i, s := range all {
		c := colours[i%len(colours)]
		var p1, p2, p3 []string
		for start := 0; start < len(s.ms); start += bucket {
			end := min(start+bucket, len(s.ms))
			mid := (start + end) / 2
			p1 = append(p1, fmt.Sprintf("%.1f,%.1f", x(mid), y1(median(s.ms[start:end]))))
			p2 = append(p2, fmt.Sprintf("%.1f,%.1f", x(mid), y2(median(s.metadata[start:end]))))
			if f := sampledMedian(s.fresh[start:end]); f > 0 {
				p3 = append(p3, fmt.Sprintf("%.1f,%.1f", x(mid), y1(f)))
			}
		}
		for _, p := range [][]string{p1, p2} {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", c, strings.Join(p, " "))
		}
		if len(p3) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.2" stroke-dasharray="4 3" points="%s"/>`+"\n", c, strings.Join(p3, " "))
		}
		first, last, w := s.medians()
		ly := top + 16 + 16*float64(i)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="3"/>`+"\n", left+10, ly-4, left+30, ly-4, c)
		legend := fmt.Sprintf("%s: %d commits, median %.1f ms (first %d) → %.1f ms (last %d)", s.name, len(s.ms), first, w, last, w)
		if len(p3) > 0 {
			legend = fmt.Sprintf("%s: %d commits, %.1f → %.1f ms (first / last %d); dashed: fresh tables%s", s.name, len(s.ms), first, last, w, s.vsFresh())
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", left+36, ly, legend)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
