package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/snapshot"
)

type auditFlags struct {
	tableFlags
	brokerFlags
	branch        string
	topic         string
	deep          bool
	verifyContent bool
	json          bool
	html          string
	pdf           string
	accept        string
	// version is --metadata-location: the table version to audit.
	version string
	registryFlags
}

func newAuditCmd() *cobra.Command {
	var f auditFlags
	cmd := &cobra.Command{
		Use:   "audit --table NAMESPACE.TABLE [--deep] [--brokers HOST:PORT [--verify-content]] [--json] [--html FILE] [--pdf FILE]",
		Short: "Prove a table complete: every offset of the log accounted for, exactly once",
		Long: `Audit a floe table against its ledger (the offset ranges each snapshot committed) and report,
per topic partition, whether every offset from the first sunk one to the next one is accounted
for. The levels run cheapest first; each finding names the level that saw it:

  ledger   snapshot summaries (and their ranges files) only: gaps and overlaps between ranges,
           ranges lost to retention
  files    manifests only (always on): every live data file inside one range of the floe commit
           that added it, record counts per range; files added by other writers, files deleted
           or overwritten, row-level delete files
  rows     --deep, reads only the partition and offset columns: every offset unique and inside a
           range, exact counts, each file's rows as its manifest describes them
  broker   --brokers: [log start, high watermark) against the ledger: lag, offsets deleted by
           retention before they were sunk, partitions the table has never seen
  content  --verify-content: re-reads the retained log and compares key, value, headers and
           timestamp of every record with its row; classifies offsets without rows as
           transaction markers, aborted records or compacted

A typed table (floe sink --value json|registry, --key ...) sent the records that could not become
rows to its dead-letter table, which the ledger names: every level checks it too (each range's
rows plus dead letters, no offset in both tables), and the content level decodes every record
as the sink does and compares the row it makes (with --schema-registry for a table decoded
through a registry), and compares each dead letter with the record's bytes.

A state table (floe.fold=latest, written copy-on-write by an earlier floe's replay --fold latest;
today's writes an upsert table) keeps only each key's latest record, so its files, rows and
content are checked against a state table's invariants: files inside the partition's coverage,
no more rows than records folded, one row per key and no null key, every row a copy of its key's
latest record. The report says "state table".

An upsert table (floe sink --mode upsert) holds one row per key, kept with equality deletes: the
files level checks its delete files too (added by floe, equality deletes on the key columns,
none removed by another writer), the rows level reads it with deletes applied (one row per key),
and the content level proves it equal to the fold of the log over the ledger's ranges, key by key,
with the sink's winner rule, and every offset accounted for. Findings name the key. The report
says "upsert table"; see docs/upsert.md.

The audit writes nothing, to the table or to the broker. --json prints a stable document (schema
floe.audit/v1, see docs/audit.md) with an evidence digest: the SHA-256 of the canonical ledger
and the table's metadata location, to archive with the report. --html FILE also writes the report
as one self-contained HTML file for a person to read or print: the verdict, per partition a
coverage bar drawn to scale (ranges, gaps, overlaps, losses, dead letters, the broker's log and
the lag), the findings with their evidence and how to re-verify the digest. It loads nothing
from the network (inline CSS and SVG, no script). --pdf FILE prints that report to PDF with
headless Chromium, which must be installed (Debian's chromium).

A finding that was reviewed and must stay (a loss recorded with --on-data-loss record stays in
the ledger for good) can be accepted: --accept FILE takes an earlier audit's JSON report of the
table, and its findings, met again unchanged (same partition, offsets, file, snapshot, detail), are
listed apart and do not fail the audit; a new finding, or the same loss grown, still does.
Accepted findings that say rows are missing from the table (missing-file, count-mismatch, ...)
make the verdict COMPLETE AS ACCEPTED, which does not claim every offset.

Exit status: 0 the table is complete (but for accepted findings), 1 there are findings, 2 the
audit could not run.`,
		Example: `  floe audit --table lake.orders
  floe audit --table lake.orders --deep --brokers localhost:9092 --verify-content
  floe audit --table lake.orders --brokers localhost:9092 --json > audit.json
  floe audit --table lake.orders --brokers localhost:9092 --html audit.html
  floe audit --table lake.orders --json > reviewed.json   # exits 1: it has findings to review
  floe audit --table lake.orders --accept reviewed.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAudit(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), &f)
		},
	}
	fs := cmd.Flags()
	f.tableFlags.register(fs)
	fs.StringVar(&f.branch, "branch", "", "branch or tag whose ledger is audited (default main); a tag's ledger is its snapshot's ancestry")
	f.brokerFlags.register(fs, ": adds the broker level")
	topicFlag(fs, &f.topic, "audit only this topic of the ledger (default: every topic)")
	fs.BoolVar(&f.deep, "deep", false, "also read the partition and offset columns of every live data file")
	fs.BoolVar(&f.verifyContent, "verify-content", false, "re-read the retained log and compare every record with its row (needs --brokers)")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON (schema floe.audit/v1)")
	fs.StringVar(&f.html, "html", "", "also write the report as one self-contained HTML `FILE` (to read in a browser or print)")
	fs.StringVar(&f.accept, "accept", "", "accept the findings an earlier audit's JSON report `FILE` lists: shown, not counted")
	fs.StringVar(&f.pdf, "pdf", "", "also print the HTML report to a PDF `FILE`, with headless Chromium (apt-get install chromium)")
	fs.StringVar(&f.version, "metadata-location", "", "audit the ledger of the table version this metadata `FILE` holds (an earlier report's evidence.metadata_location), not the table as it is: the same digest proves the same ledger and version; the ledger level only")
	f.registryFlags.register(fs)
	return cmd
}

// versionOnlyLedger leaves out of an audit of an earlier version
// (--metadata-location) the flags that read the table and the log as they
// are: refused when given on the command line, and left out with a note
// when a FLOE_* variable or the config file set them (a local stack's
// env.sh sets FLOE_BROKERS for every command, and the refusal named a
// flag the user never gave: from a new user).
func versionOnlyLedger(ctx context.Context, stderr io.Writer, f *auditFlags) error {
	src := sourcesOf(ctx)
	var given, dropped []string
	for _, fl := range []struct {
		name  string
		set   bool
		unset func()
	}{
		{"deep", f.deep, func() { f.deep = false }},
		{"verify-content", f.verifyContent, func() { f.verifyContent = false }},
		{"brokers", len(f.brokers) > 0, func() { f.brokers = nil }},
	} {
		switch {
		case !fl.set:
		case src[fl.name] != "":
			fl.unset()
			dropped = append(dropped, fmt.Sprintf("--%s (set by %s)", fl.name, src[fl.name]))
		default:
			given = append(given, "--"+fl.name)
		}
	}
	if len(given) > 0 {
		return fmt.Errorf("--metadata-location audits the ledger of an earlier table version, which its metadata file holds; the files it names may be gone since (expired, compacted) and the log has moved on: drop %s (read the table and the log as they are)",
			strings.Join(given, ", "))
	}
	if len(dropped) > 0 {
		fmt.Fprintf(stderr, "not used with --metadata-location, which audits an earlier version's ledger only: %s\n", strings.Join(dropped, ", "))
	}
	return nil
}

// runAudit audits the table the flags name and prints the report. A table
// with findings returns a codeError carrying exitFindings and no message.
func runAudit(ctx context.Context, stdout, stderr io.Writer, f *auditFlags) error {
	if f.verifyContent && len(f.brokers) == 0 {
		return errors.New("--verify-content re-reads the log: it needs --brokers HOST:PORT")
	}
	// A report file that cannot be written fails the audit, so its folder
	// is checked before a long audit runs, not after.
	for _, out := range [][2]string{{"--html", f.html}, {"--pdf", f.pdf}} {
		if out[1] == "" {
			continue
		}
		if dir := filepath.Dir(out[1]); !folderExists(dir) {
			return errors.New(valueMessage(out[0], out[1], fmt.Sprintf("a file in a folder that exists (%s does not)", dir)))
		}
	}
	var baseline []byte
	if f.accept != "" {
		b, err := os.ReadFile(f.accept)
		if err != nil {
			return fmt.Errorf("--accept %s: %w", f.accept, err)
		}
		baseline = b
	}
	if f.version != "" {
		if err := versionOnlyLedger(ctx, stderr, f); err != nil {
			return err
		}
	}
	tbl, err := f.open(ctx, snapshot.OpenOptions{Branch: f.branch, ReadTag: true})
	if err != nil {
		return err
	}
	if f.version != "" {
		if tbl, err = snapshot.OpenVersion(ctx, tbl.Catalog(), tbl.Identifier(), f.version, snapshot.OpenOptions{Branch: f.branch, ReadTag: true}); err != nil {
			return fmt.Errorf("--metadata-location: %w", err)
		}
	}
	opts := audit.Options{
		Depth:         audit.DepthFiles,
		Topic:         f.topic,
		VerifyContent: f.verifyContent,
		Progress: func(desc string, total int64) audit.Progress {
			return newProgress(stderr, desc, total)
		},
	}
	if f.deep {
		opts.Depth = audit.DepthRows
	}
	if f.version != "" {
		opts.Depth = audit.DepthLedger
	}
	if opts.Registry, err = f.registry(); err != nil {
		return err
	}
	broker, err := f.dialOptional(ctx, false)
	if err != nil {
		return err
	}
	if broker != nil {
		defer broker.Close()
		opts.Broker = broker
	}
	rep, err := audit.Run(ctx, tbl, opts)
	if err != nil {
		return err
	}
	if baseline != nil {
		if err := rep.Accept(baseline, f.accept); err != nil {
			return err
		}
	}
	if broker != nil {
		rep.BrokersSource = sourcesOf(ctx)["brokers"]
	}
	// The files first: when one cannot be written, the audit fails before
	// printing a report, as every failed audit does.
	if f.html != "" {
		rep.CatalogArgs = append(reportCatalogArgs(f.catalog), f.reportS3Args(tbl.Iceberg().Location())...)
		if err := writeHTMLReport(f.html, rep); err != nil {
			return err
		}
	}
	if f.pdf != "" {
		if err := writePDFReport(ctx, f.pdf, rep); err != nil {
			return err
		}
	}
	if f.json {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	// Where the files went, after the report; beside --json, whose
	// stdout is the report alone, an info record of the log, as the
	// audit's progress is: written to stderr as a bare line, it made
	// every scheduled audit's stderr non-empty, so that a script could not
	// alert on it (a new user's cron job; --log-level warn leaves it out).
	for _, out := range [][2]string{{"HTML", f.html}, {"PDF", f.pdf}} {
		switch {
		case out[1] == "":
		case f.json:
			slog.Info(fmt.Sprintf("wrote the %s report", out[0]), "file", out[1])
		default:
			fmt.Fprintf(stdout, "wrote the %s report to %s\n", out[0], out[1])
		}
	}
	if !rep.Complete() {
		return &codeError{code: exitFindings}
	}
	return nil
}

// folderExists reports whether dir is a folder.
func folderExists(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.IsDir()
}

// writeHTMLReport writes rep as HTML to path. It renders the whole report
// before it opens the file, so a failed rendering leaves no half a report.
func writeHTMLReport(path string, rep *audit.Report) error {
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write the HTML report: %w", err)
	}
	return nil
}

// reportCatalogArgs names catalog spec for the command an HTML report
// gives to audit the table again, from whatever folder: a SQLite file by
// its absolute path (the default one too, which is relative), any other
// catalog as given, its password hidden.
func reportCatalogArgs(spec string) []string {
	if k, err := catalog.KindOf(spec); err == nil && k == catalog.SQLite && !strings.Contains(spec, ":") {
		if abs, err := filepath.Abs(spec); err == nil {
			spec = abs
		}
	}
	return []string{"--catalog", shellQuote(catalog.Redact(spec))}
}

// reportS3Args are the S3 settings, credentials aside, that the command
// an HTML report gives needs to reach a table at location on S3: the
// endpoint and region this audit used, from the flags or the environment
// (the command failed in a reviewer's shell without them: from a
// new-user run). Credentials come from the reviewer's own AWS setup.
func (f *catalogFlags) reportS3Args(location string) []string {
	if !strings.HasPrefix(location, "s3://") && !strings.HasPrefix(location, "s3a://") {
		return nil
	}
	var args []string
	if e := cmp.Or(f.s3Endpoint, os.Getenv("AWS_ENDPOINT_URL_S3"), os.Getenv("AWS_ENDPOINT_URL")); e != "" {
		args = append(args, "--s3-endpoint", shellQuote(e))
	}
	if r := cmp.Or(f.s3Region, os.Getenv("AWS_REGION"), os.Getenv("AWS_DEFAULT_REGION")); r != "" {
		args = append(args, "--s3-region", shellQuote(r))
	}
	return args
}

// shellQuote quotes s as one word for a POSIX shell, when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
