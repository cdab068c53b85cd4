package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/floe-dev/floe/audit"
)

// pdfBrowsers are the names Chromium's executable has in distributions'
// packages (Debian's chromium, Ubuntu's chromium-browser). There is no PDF
// renderer for HTML and CSS in pure Go that draws the report's SVG bars
// and honours its print stylesheet, so floe prints through Chromium, as a
// person would with the browser's Print to PDF.
var pdfBrowsers = []string{"chromium", "chromium-browser"}

// pdfTimeout bounds one rendering: Chromium takes about a second.
const pdfTimeout = 2 * time.Minute

// writePDFReport renders rep's HTML report to a PDF file at path with
// headless Chromium, which must be installed.
func writePDFReport(ctx context.Context, path string, rep *audit.Report) error {
	bin := ""
	for _, name := range pdfBrowsers {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return errors.New("--pdf prints the HTML report with Chromium, which is not installed (Debian: apt-get install chromium); --html FILE writes the same report, which any browser prints")
	}
	out, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("write the PDF report: %w", err)
	}
	dir, err := os.MkdirTemp("", "floe-pdf-")
	if err != nil {
		return fmt.Errorf("write the PDF report: %w", err)
	}
	defer os.RemoveAll(dir)
	page := filepath.Join(dir, "report.html")
	if err := writeHTMLReport(page, rep); err != nil {
		return err
	}
	// Chromium prints into the temporary folder (its profile goes there
	// too); path is written only once a whole PDF exists, so a failed
	// rendering leaves no half a file.
	tmp := filepath.Join(dir, "report.pdf")
	args := []string{"--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		// The report fetches nothing; these keep Chromium itself from
		// reaching out (updates, sync, QUIC probes).
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
		"--user-data-dir=" + filepath.Join(dir, "profile"),
		"--no-pdf-header-footer", "--print-to-pdf=" + tmp, "file://" + page}
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root; the page is floe's
		// own, without script.
		args = append([]string{"--no-sandbox"}, args...)
	}
	cctx, cancel := context.WithTimeout(ctx, pdfTimeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(cctx, bin, args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("print the report to PDF with %s: %w: %s", bin, err, lastLine(stderr.String()))
	}
	if st, err := os.Stat(tmp); err != nil || st.Size() == 0 {
		return fmt.Errorf("print the report to PDF with %s: it wrote no PDF: %s", bin, lastLine(stderr.String()))
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		return fmt.Errorf("write the PDF report: %w", err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fmt.Errorf("write the PDF report: %w", err)
	}
	return nil
}

// lastLine is the last non-empty line of s, for an error message.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
