package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// soakHeader is the first line of BenchmarkSoak's CSV. Files written
// before it recorded the heap, or the commit rate and CPU, end earlier (at
// archive_bytes at the earliest: soakOldColumns), and their plots leave
// those panels out.
var soakHeader = []string{"commit", "rss_mib", "commit_ms", "metadata_bytes", "live_files", "snapshots", "archive_bytes", "commits_per_s", "cpu_ms_per_commit",
	"heap_goal_mib", "heap_idle_mib"}

const soakOldColumns = 7

// soakPanels are the columns drawn, each in a panel of its own, and how a
// value is shown.
var soakPanels = []soakPanel{
	{1, "sink RSS, MiB", 1},
	{2, "median commit latency, ms", 1},
	{3, "metadata.json, KiB", 1024},
	{4, "live data files", 1},
	{6, "ledger archive, KiB", 1024},
	{7, "commits a second", 1},
	{8, "sink CPU per commit, ms", 1},
	{9, "Go heap goal (about twice the live heap), MiB", 1},
	{10, "Go heap idle, not returned, MiB", 1},
}

type soakPanel struct {
	column int
	title  string
	scale  float64 // divides the CSV's value
}

// soakRun is one BenchmarkSoak file: its rows, each a sample.
type soakRun struct {
	name string
	rows [][]float64
}

// isSoak reports whether path starts with BenchmarkSoak's header.
func isSoak(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head, err := csv.NewReader(f).Read()
	return err == nil && len(head) >= soakOldColumns && len(head) <= len(soakHeader) && slices.Equal(head, soakHeader[:len(head)])
}

func readSoak(path string) (*soakRun, error) {
	rows, err := readRows(path)
	if err != nil {
		return nil, err
	}
	r := &soakRun{name: strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))}
	for i, row := range rows[1:] {
		if len(row) != len(rows[0]) {
			return nil, fmt.Errorf("%s line %d: %d fields, want %d", path, i+2, len(row), len(rows[0]))
		}
		v := make([]float64, len(row))
		for j, s := range row {
			if v[j], err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("%s line %d: %w", path, i+2, err)
			}
		}
		r.rows = append(r.rows, v)
	}
	if len(r.rows) == 0 {
		return nil, fmt.Errorf("%s: no samples", path)
	}
	return r, nil
}

// runSoak draws BenchmarkSoak files, one panel per measure and one line per
// file, and prints per file each measure's first and last sample and the
// last over the second (the first sample's window still fills the
// retention window).
func runSoak(out string, inputs []string, summary io.Writer) error {
	var runs []*soakRun
	for _, in := range inputs {
		r, err := readSoak(in)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		first, last := r.rows[min(1, len(r.rows)-1)], r.rows[len(r.rows)-1]
		fmt.Fprintf(summary, "%s: %.0f commits", r.name, last[0])
		for _, p := range soakPanels {
			if p.column >= len(last) {
				continue
			}
			fmt.Fprintf(summary, "; %s %s at %.0f -> %s%s", p.title, trimFloat(round1(first[p.column]/p.scale)), first[0],
				trimFloat(round1(last[p.column]/p.scale)), growth(first[p.column], last[p.column]))
		}
		fmt.Fprintln(summary)
	}
	return os.WriteFile(out, []byte(soakSVG(runs)), 0o644)
}

// growth is " (xR)", last over first, or "" when first is 0: a measure
// that starts at nothing (no archive before the first expiry) has no
// ratio to give, and printing xNaN or x+Inf would read as a fault.
func growth(first, last float64) string {
	if first == 0 {
		return ""
	}
	return fmt.Sprintf(" (x%.2f)", last/first)
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// soakSVG draws the panels one above the other, sharing the commit axis.
func soakSVG(runs []*soakRun) string {
	const ph, pgap = 150.0, 45.0
	maxC := 0.0
	for _, r := range runs {
		maxC = max(maxC, r.rows[len(r.rows)-1][0])
	}
	// The panels of the columns some file has.
	panels := slices.DeleteFunc(slices.Clone(soakPanels), func(p soakPanel) bool {
		return !slices.ContainsFunc(runs, func(r *soakRun) bool { return p.column < len(r.rows[0]) })
	})
	plotW := width - left - right
	height := top + float64(len(panels))*(ph+pgap) + bottom
	x := func(c float64) float64 { return left + plotW*c/maxC }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="15" font-weight="bold">floe sink soak: what grows with the table's age</text>`+"\n", left)
	for i, r := range runs {
		c := colours[i%len(colours)]
		lx := left + 330 + 200*float64(i)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="16" x2="%.1f" y2="16" stroke="%s" stroke-width="3"/><text x="%.1f" y="20">%s</text>`+"\n", lx, lx+20, c, lx+26, r.name)
	}
	for pi, p := range panels {
		pt := top + float64(pi)*(ph+pgap)
		hi := 0.0
		for _, r := range runs {
			for _, row := range r.rows {
				if p.column < len(row) {
					hi = max(hi, row[p.column]/p.scale)
				}
			}
		}
		hi = niceCeil(hi)
		y := func(v float64) float64 { return pt + ph*(1-v/hi) }
		for g := 0; g <= 4; g++ {
			v := hi * float64(g) / 4
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), width-right, y(v))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, trimFloat(v))
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", left, pt, plotW, ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-weight="bold">%s</text>`+"\n", left+6, pt+14, p.title)
		step := niceCeil(maxC / 10)
		for v := 0.0; v <= maxC; v += step {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(v), pt+ph+14, int(v))
		}
		for i, r := range runs {
			if p.column >= len(r.rows[0]) {
				continue
			}
			pts := make([]string, len(r.rows))
			for j, row := range r.rows {
				pts[j] = fmt.Sprintf("%.1f,%.1f", x(row[0]), y(row[p.column]/p.scale))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", colours[i%len(colours)], strings.Join(pts, " "))
		}
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">commit number</text>`+"\n", left+plotW/2, height-10)
	b.WriteString("</svg>\n")
	return b.String()
}
