package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// auditStack starts a local stack and sinks 300 events of topic orders (3
// partitions) into lake.orders. It returns the stack and the catalog
// flags.
func auditStack(t *testing.T) (*localstack.Stack, []string) {
	t.Helper()
	st, _, _ := partitionedStack(t, "orders", 3)
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 3, 300, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	if code, out, errs := floe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...); code != 0 {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	return st, loc
}

// auditTable opens (creating) a table of the stack's catalog.
func auditTable(t *testing.T, st *localstack.Stack, name string) *snapshot.Table {
	t.Helper()
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// auditJSON is the part of the floe.audit/v1 document the tests read.
type auditJSON struct {
	Schema     string   `json:"schema"`
	Complete   bool     `json:"complete"`
	Levels     []string `json:"levels"`
	RowsRead   int64    `json:"rows_read"`
	Partitions []struct {
		Topic     string     `json:"topic"`
		Partition int32      `json:"partition"`
		Gaps      [][2]int64 `json:"gaps"`
		Overlaps  [][2]int64 `json:"overlaps"`
		Lost      [][2]int64 `json:"lost"`
		Lag       *int64     `json:"lag"`
		Rows      *int64     `json:"rows"`
		Records   int64      `json:"records"`
		Deletes   *int64     `json:"deletes"`
		Skipped   *int64     `json:"skipped"`
		Content   *struct {
			Verified int64 `json:"verified"`
		} `json:"content"`
		Status string `json:"status"`
	} `json:"partitions"`
	Findings []struct {
		Level   string    `json:"level"`
		Kind    string    `json:"kind"`
		Topic   *string   `json:"topic"`
		Offsets *[2]int64 `json:"offsets"`
	} `json:"findings"`
	Evidence struct {
		Digest           string `json:"digest"`
		MetadataLocation string `json:"metadata_location"`
	} `json:"evidence"`
}

func decodeAudit(t *testing.T, out string) auditJSON {
	t.Helper()
	var doc auditJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	return doc
}

// checkWidth fails when a text report line is wider than 80 columns; file
// paths are exempt.
func checkWidth(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if len(line) > 80 && !strings.Contains(line, "file://") && !strings.HasSuffix(line, ".html") && !strings.HasPrefix(line, "audit of ") {
			t.Fatalf("line wider than 80 columns:\n%s", line)
		}
	}
}

func TestAuditCommandComplete(t *testing.T) {
	st, loc := auditStack(t)
	base := append([]string{"audit", "--table", "lake.orders"}, loc...)

	code, out, errs := floe(t, base...)
	if code != exitOK || !strings.Contains(out, "verdict: COMPLETE") || errs != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	checkWidth(t, out)

	code, out, errs = floe(t, append(base, "--json")...)
	doc := decodeAudit(t, out)
	if code != exitOK || !doc.Complete || doc.Schema != "floe.audit/v1" || len(doc.Partitions) != 3 ||
		!strings.HasPrefix(doc.Evidence.Digest, "sha256:") {
		t.Fatalf("exit %d, %+v\n%s", code, doc, errs)
	}
	for _, p := range doc.Partitions {
		if p.Lag != nil || p.Rows != nil || p.Gaps == nil || len(p.Gaps) != 0 || p.Status != "complete" {
			t.Fatalf("partition without broker and --deep: %+v (want lag and rows null, gaps [])", p)
		}
	}

	code, out, errs = floe(t, append(base, "--json", "--deep", "--brokers", st.Brokers[0], "--verify-content")...)
	doc = decodeAudit(t, out)
	if code != exitOK || !doc.Complete || len(doc.Levels) != 5 {
		t.Fatalf("exit %d, %+v\n%s", code, doc, errs)
	}
	var verified int64
	for _, p := range doc.Partitions {
		if p.Lag == nil || *p.Lag != 0 || p.Rows == nil || p.Content == nil {
			t.Fatalf("partition with broker, --deep and content: %+v", p)
		}
		verified += p.Content.Verified
	}
	if verified != 300 {
		t.Fatalf("%d records verified, want 300", verified)
	}
	// The rows and content levels both read the 300 rows; the report
	// counts them once.
	if doc.RowsRead != 300 {
		t.Errorf("rows_read %d with --deep and --verify-content, want the table's 300", doc.RowsRead)
	}

	// The verdict says how far "every offset" goes: to the end of the log,
	// to the table's next offset with the lag named, or unchecked; and by
	// which levels: the default level reads no data file (a deleted one
	// went unseen under a verdict of every offset, from a new-user run).
	verdict := func(out string) string {
		_, v, _ := strings.Cut(out, "verdict: ")
		v, _, _ = strings.Cut(v, "\nevidence")
		return strings.Join(strings.Fields(v), " ")
	}
	_, out, _ = floe(t, append(base, "--brokers", st.Brokers[0])...)
	if want := "COMPLETE, every offset of 3 partitions is accounted for by the ledger and the file list, up to the end of the log (data files not read: --deep reads them)"; verdict(out) != want {
		t.Errorf("verdict without lag %q, want %q", verdict(out), want)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 3, 30, time.Now(), 2)); err != nil {
		t.Fatal(err)
	}
	code, out, _ = floe(t, append(base, "--brokers", st.Brokers[0])...)
	if want := "COMPLETE, every offset of 3 partitions up to the table's next offset is accounted for by the ledger and the file list (data files not read: --deep reads them); 30 offsets of the log not sunk yet (lag, not a finding)"; code != exitOK || verdict(out) != want {
		t.Errorf("verdict with lag: exit %d, %q, want %q", code, verdict(out), want)
	}
	checkWidth(t, out)
	_, out, _ = floe(t, base...)
	if want := "COMPLETE, every offset of 3 partitions up to the table's next offset is accounted for by the ledger and the file list (data files not read: --deep reads them; lag not checked: no --brokers)"; verdict(out) != want {
		t.Errorf("verdict without --brokers %q, want %q", verdict(out), want)
	}
}

// commitRows injects a hand-made floe commit of partition p: rows at
// offsets, in one range [low, high), wherever the ledger ends.
func commitRows(t *testing.T, tbl *snapshot.Table, p int32, low, high int64, offsets ...int64) {
	t.Helper()
	tp := mapping.TopicPartition{Topic: "orders", Partition: p}
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for _, o := range offsets {
		rb.Append(&kgo.Record{Topic: tp.Topic, Partition: p, Offset: o, Value: fmt.Appendf(nil, "v%d", o), Timestamp: time.Now()})
	}
	floetest.ForceCommit(t, tbl, []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: low, High: high},
		Records: int64(len(offsets))}}, rb.NewBatch())
}

func TestAuditCommandFindings(t *testing.T) {
	st, loc := auditStack(t)
	tbl := auditTable(t, st, "lake.orders")
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	next := l.Next()[mapping.TopicPartition{Topic: "orders", Partition: 1}]
	// A commit that skips 5 offsets of partition 1.
	commitRows(t, tbl, 1, next+5, next+7, next+5, next+6)

	base := append([]string{"audit", "--table", "lake.orders"}, loc...)
	code, out, errs := floe(t, base...)
	if code != exitFindings || errs != "" || !strings.Contains(out, "NOT COMPLETE") ||
		!strings.Contains(out, fmt.Sprintf("ledger gap orders/1 [%d, %d)", next, next+5)) {
		t.Fatalf("exit %d (want %d, no message)\nstdout:\n%s\nstderr:\n%s", code, exitFindings, out, errs)
	}
	checkWidth(t, out)

	code, out, _ = floe(t, append(base, "--json", "--brokers", st.Brokers[0])...)
	doc := decodeAudit(t, out)
	if code != exitFindings || doc.Complete {
		t.Fatalf("exit %d, complete %v", code, doc.Complete)
	}
	for _, p := range doc.Partitions {
		want := 0
		if p.Partition == 1 {
			want = 1
		}
		if len(p.Gaps) != want || (want == 1 && p.Gaps[0] != [2]int64{next, next + 5}) {
			t.Fatalf("partition %d gaps %v", p.Partition, p.Gaps)
		}
	}
	// The broker never had offsets past its high watermark: the ledger now
	// claims [next+5, next+7) beyond it.
	kinds := map[string]bool{}
	for _, f := range doc.Findings {
		kinds[f.Level+" "+f.Kind] = true
	}
	if !kinds["ledger gap"] || !kinds["broker beyond-end"] || len(doc.Findings) != 2 {
		t.Fatalf("findings %+v", doc.Findings)
	}

	// --html writes the same report for a person beside the JSON on
	// stdout; the exit status still says there are findings.
	page := filepath.Join(t.TempDir(), "audit.html")
	code, out, errs = floe(t, append(base, "--json", "--brokers", st.Brokers[0], "--html", page)...)
	// It says where the page went in the log, at info level (stdout is
	// the JSON alone): a scheduled audit's --log-level warn keeps its
	// stderr empty unless something is wrong, where a bare line on
	// stderr made every run's non-empty (from a new-user run).
	if code != exitFindings || !strings.Contains(errs, `level=INFO msg="wrote the HTML report" file=`+page+"\n") || decodeAudit(t, out).Evidence.Digest != doc.Evidence.Digest {
		t.Fatalf("--html: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := floe(t, append(base, "--json", "--brokers", st.Brokers[0], "--html", page, "--log-level", "warn")...); code != exitFindings || errs != "" {
		t.Fatalf("--html --log-level warn: exit %d, stderr %q, want none", code, errs)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NOT COMPLETE", doc.Evidence.Digest,
		fmt.Sprintf(`data-kind="gap" data-low="%d" data-high="%d"`, next, next+5), `data-finding="beyond-end"`} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the HTML report lacks %s", want)
		}
	}
}

func TestAuditCommandBadInput(t *testing.T) {
	st, loc := auditStack(t)
	audit := func(want int, wantErr string, args ...string) {
		t.Helper()
		code, out, errs := floe(t, append(append([]string{"audit"}, args...), loc...)...)
		if code != want || !strings.Contains(errs, wantErr) {
			t.Fatalf("%v: exit %d (want %d), stderr %q (want %q), stdout:\n%s", args, code, want, errs, wantErr, out)
		}
		if want == exitError && out != "" {
			t.Fatalf("%v: a failed audit printed a report:\n%s", args, out)
		}
	}
	audit(exitError, "missing --table")
	audit(exitError, "does not exist", "--table", "lake.nope")
	audit(exitError, "--verify-content re-reads the log", "--table", "lake.orders", "--verify-content")
	audit(exitError, `no range of topic "payments"`, "--table", "lake.orders", "--topic", "payments")
	bad := filepath.Join(t.TempDir(), "no", "such", "folder", "a.html")
	// Refused before the audit runs, naming the flag and the missing folder.
	audit(exitError, fmt.Sprintf("--html %q: want a file in a folder that exists (%s does not)", bad, filepath.Dir(bad)), "--table", "lake.orders", "--html", bad)
	audit(exitError, fmt.Sprintf("--pdf %q: want a file in a folder that exists", bad), "--table", "lake.orders", "--pdf", bad)

	// A table floe never wrote, whose schema cannot hold floe rows.
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(t.Context(), []string{"other"}, nil); err != nil {
		t.Fatal(err)
	}
	plain := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	if _, err := cat.CreateTable(t.Context(), []string{"other", "plain"}, plain); err != nil {
		t.Fatal(err)
	}
	audit(exitError, "cannot hold floe rows", "--table", "other.plain")
	audit(exitError, "cannot reach brokers", "--table", "lake.orders", "--brokers", "127.0.0.1:1", "--dial-timeout", "1s")

	// Created by floe but never written: no ledger.
	auditTable(t, st, "lake.unwritten")
	audit(exitError, "has no ledger to audit", "--table", "lake.unwritten")

	// Written by someone else, with floe's schema: still no ledger.
	other := auditTable(t, st, "lake.other")
	txn := other.Iceberg().NewTransaction()
	if err := txn.AddFiles(t.Context(), nil, iceberg.Properties{"writer": "spark"}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	audit(exitError, "not written by floe sink", "--table", "lake.other")

	// A ledger property edited by hand.
	tbl := auditTable(t, st, "lake.orders")
	txn = tbl.Iceberg().NewTransaction()
	if err := txn.AddFiles(t.Context(), nil, iceberg.Properties{
		mapping.KeyVersion: mapping.LedgerVersion, mapping.KeyCommitID: "hand-made", mapping.KeyRangesPrefix + "orders": "1:x-2:1",
	}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	audit(exitError, "malformed ledger property", "--table", "lake.orders")
}

func TestDemoAudit(t *testing.T) {
	st, _ := auditStack(t)
	tbl := auditTable(t, st, "lake.orders")
	var out bytes.Buffer
	page := filepath.Join(t.TempDir(), "payments.html")
	if err := demoAudit(t.Context(), &out, st, tbl, page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"verdict: COMPLETE", "ledger lost payments/0 [100, 150)", "verdict: NOT COMPLETE", "\n    " + page + "\n"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out.String())
		}
	}
	checkWidth(t, out.String())
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "NOT COMPLETE") {
		t.Fatalf("the demo's HTML report (%v):\n%.300s", err, b)
	}
}

// TestAuditCommandPDF: --pdf prints the HTML report with headless Chromium;
// without Chromium it fails before printing a report, naming the package.
func TestAuditCommandPDF(t *testing.T) {
	testenv.Tool(t, "chromium", "apt-get install chromium")
	_, loc := auditStack(t)
	pdf := filepath.Join(t.TempDir(), "audit.pdf")
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.orders", "--pdf", pdf}, loc...)...)
	if code != exitOK || !strings.Contains(out, "verdict: COMPLETE") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	b, err := os.ReadFile(pdf)
	if err != nil || !bytes.HasPrefix(b, []byte("%PDF-")) || len(b) < 10_000 {
		t.Fatalf("--pdf wrote %d bytes (%v), starting %q", len(b), err, b[:min(len(b), 8)])
	}

	t.Setenv("PATH", t.TempDir())
	code, out, errs = floe(t, append([]string{"audit", "--table", "lake.orders", "--pdf", pdf + ".2"}, loc...)...)
	if code != exitError || out != "" || !strings.Contains(errs, "apt-get install chromium") {
		t.Fatalf("--pdf without Chromium: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestAuditNotesStartAtHighWatermark: a sink started at the latest offset
// records each partition's start; when nothing was produced since, the
// start equals the high watermark and the retained [0, start) was never
// sunk. The broker level noted such offsets only for a start below the
// high watermark and said nothing here.
func TestAuditNotesStartAtHighWatermark(t *testing.T) {
	st, loc := sinkStack(t)
	sink := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.late", "--start", "latest", "--stop-at-end"}, loc...)
	// The run reports where it began each partition (it printed no next
	// offsets; from a new-user run).
	if code, out, errs := floe(t, sink...); code != exitOK || !regexp.MustCompile(`next offsets: orders/0=\d+ orders/1=\d+ orders/2=\d+`).MatchString(out) {
		t.Fatalf("sink: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.late", "--brokers", st.Brokers[0], "--json"}, loc...)...)
	var doc struct {
		Complete bool     `json:"complete"`
		Notes    []string `json:"notes"`
	}
	if err := json.Unmarshal([]byte(out), &doc); code != exitOK || err != nil || !doc.Complete {
		t.Fatalf("audit: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	// One note for the 3 partitions (there were two each).
	re := regexp.MustCompile(`^the ledger records that the sink began orders/0 at offset (\d+), orders/1 at offset (\d+) and orders/2 at offset (\d+) .*; the broker retains orders/0 \[0, (\d+)\), orders/1 \[0, (\d+)\) and orders/2 \[0, (\d+)\) below them, which the table does not hold$`)
	if len(doc.Notes) != 1 || !re.MatchString(doc.Notes[0]) {
		t.Fatalf("no note, or not one, of the partitions' retained offsets before their recorded start: %q", doc.Notes)
	}
}

// TestAuditBrokersDownSaysTableAlone (from a new-user run): with brokers
// that are down (FLOE_BROKERS left from a stopped stack), audit, where and
// as-of stop naming the brokers and saying that an empty --brokers answers
// from the table alone; with it, the audit answers.
func TestAuditBrokersDownSaysTableAlone(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	down := []string{"--brokers", fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t)), "--dial-timeout", "1s"}
	for _, args := range [][]string{
		{"audit", "--table", "lake.orders"},
		{"where", "--table", "lake.orders", "--partition", "0", "--offset", "1"},
		{"as-of", "--table", "lake.orders", "--offsets", "0=1"},
	} {
		code, _, errs := floe(t, append(append(args, down...), loc...)...)
		if code != exitError || !strings.Contains(errs, "cannot reach brokers") || !strings.Contains(errs, "--brokers '' answers from the table alone") {
			t.Errorf("floe %s with brokers down: exit %d, %q", args[0], code, errs)
		}
	}
	if code, out, errs := floe(t, append([]string{"audit", "--table", "lake.orders", "--brokers", ""}, loc...)...); code != exitOK || !strings.Contains(out, "COMPLETE") {
		t.Errorf("floe audit --brokers '': exit %d\n%s%s", code, out, errs)
	}

	// Brokers a FLOE_* variable names (a local stack's env.sh, the stack
	// stopped since) are only detail to where and as-of: they answer from
	// the table, warning; the audit, whose broker level is part of what it
	// proves, still stops.
	t.Setenv("FLOE_BROKERS", down[1])
	t.Setenv("FLOE_DIAL_TIMEOUT", "1s")
	for _, args := range [][]string{
		{"where", "--table", "lake.orders", "--partition", "0", "--offset", "1"},
		{"as-of", "--table", "lake.orders", "--offsets", "0=1"},
	} {
		code, out, errs := floe(t, append(args, loc...)...)
		if code != exitOK || out == "" || !strings.Contains(errs, "answering from the table alone: the brokers --brokers names (set by FLOE_BROKERS) failed") {
			t.Errorf("floe %s with FLOE_BROKERS down: exit %d\n%s\n%s", args[0], code, out, errs)
		}
	}
	if code, _, errs := floe(t, append([]string{"audit", "--table", "lake.orders"}, loc...)...); code != exitError || !strings.Contains(errs, "--brokers '' answers from the table alone") {
		t.Errorf("floe audit with FLOE_BROKERS down: exit %d, %q", code, errs)
	}
}

// TestAuditNamesTheLog (from a new-user run): an audit's broker level
// judged the table against whatever cluster FLOE_BROKERS named, and the
// report (text, JSON, HTML) did not say which: the same table was
// COMPLETE without it and NOT COMPLETE with another stack's. The report
// names the brokers, the cluster id and where the brokers came from.
func TestAuditNamesTheLog(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	audit := append([]string{"audit", "--table", "lake.orders"}, loc[:2]...)
	out := mustFloe(t, audit...)
	if strings.Contains(out, "log: ") {
		t.Errorf("without --brokers the report names a log:\n%s", out)
	}
	out = mustFloe(t, append(audit, "--brokers", st.Brokers[0])...)
	if !regexp.MustCompile(`(?m)^log: brokers ` + regexp.QuoteMeta(st.Brokers[0]) + ` \(cluster [^;)]+\)$`).MatchString(out) {
		t.Errorf("--brokers: the report does not name the log it read:\n%s", out)
	}
	t.Setenv("FLOE_BROKERS", st.Brokers[0])
	html := filepath.Join(t.TempDir(), "a.html")
	out = mustFloe(t, append(audit, "--html", html)...)
	if !strings.Contains(out, "log: brokers "+st.Brokers[0]+" (cluster ") || !strings.Contains(out, "; set by FLOE_BROKERS)") {
		t.Errorf("FLOE_BROKERS: the report does not say the brokers came from it:\n%s", out)
	}
	doc, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(doc), "the watermarks of brokers "+st.Brokers[0]) || !strings.Contains(string(doc), "set by FLOE_BROKERS") {
		t.Errorf("the HTML report does not name the log (%v)", err)
	}
	var rep struct {
		Brokers   []string `json:"brokers"`
		ClusterID *string  `json:"cluster_id"`
	}
	if err := json.Unmarshal([]byte(mustFloe(t, append(audit, "--json")...)), &rep); err != nil || !slices.Equal(rep.Brokers, st.Brokers[:1]) || rep.ClusterID == nil || *rep.ClusterID == "" {
		t.Errorf("JSON: brokers %v, cluster_id %v (%v)", rep.Brokers, rep.ClusterID, err)
	}
}

// TestAuditLostNamesItsSnapshot (from an operator's run): a loss recorded
// by --on-data-loss record had a null snapshot_id in the audit's JSON,
// while the text said which snapshot recorded it.
func TestAuditLostNamesItsSnapshot(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "pay", 1, nil); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "pay", "--table", "lake.pay", "--stop-at-end", "--on-data-loss", "record"}, loc...)
	produceRound(t, st.Brokers, "pay", 1, 10, map[int32]int64{})
	mustFloe(t, sink...)
	produceRound(t, st.Brokers, "pay", 1, 10, map[int32]int64{})
	if err := st.Cluster.DeleteRecords("pay", 0, 15); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, sink...)
	code, out, errs := floe(t, append([]string{"audit", "--table", "lake.pay", "--json"}, loc[:2]...)...)
	var rep struct {
		Findings []struct {
			Kind       string `json:"kind"`
			SnapshotID *int64 `json:"snapshot_id"`
			Detail     string `json:"detail"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitFindings || len(rep.Findings) != 1 {
		t.Fatalf("audit: exit %d, %v\n%s\n%s", code, err, out, errs)
	}
	f := rep.Findings[0]
	if f.Kind != "lost" || f.SnapshotID == nil || !strings.Contains(f.Detail, fmt.Sprintf("recorded by snapshot %d)", *f.SnapshotID)) {
		t.Errorf("the lost finding: %+v", f)
	}
}

// TestAuditAcceptsReviewedLoss: a loss recorded with --on-data-loss record
// stays in the ledger, so an audit run by cron failed for good once an
// operator had reviewed it. --accept takes the reviewed audit's JSON
// report: the same loss is listed apart and the audit passes; a second
// loss fails it again, and a report of another table is refused.
func TestAuditAcceptsReviewedLoss(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "pay", 1, nil); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "pay", "--table", "lake.pay", "--stop-at-end", "--on-data-loss", "record"}, loc...)
	lose := func(upTo int64) {
		produceRound(t, st.Brokers, "pay", 1, 10, map[int32]int64{})
		mustFloe(t, sink...)
		produceRound(t, st.Brokers, "pay", 1, 10, map[int32]int64{})
		if err := st.Cluster.DeleteRecords("pay", 0, upTo); err != nil {
			t.Fatal(err)
		}
		mustFloe(t, sink...)
	}
	lose(15)
	audit := append([]string{"audit", "--table", "lake.pay"}, loc[:2]...)
	code, reviewed, errs := floe(t, append(audit, "--json")...)
	if code != exitFindings {
		t.Fatalf("audit: exit %d\n%s\n%s", code, reviewed, errs)
	}
	baseline := filepath.Join(t.TempDir(), "reviewed.json")
	if err := os.WriteFile(baseline, []byte(reviewed), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, append(audit, "--accept", baseline)...)
	if code != 0 || !strings.Contains(out, "ACCEPTED (findings of "+baseline) || !strings.Contains(out, "ledger lost pay/0 [10, 15)") ||
		!strings.Contains(out, "verdict: COMPLETE") || !strings.Contains(out, "1 finding: 1 lost") {
		t.Fatalf("audit --accept: exit %d\n%s\n%s", code, out, errs)
	}
	var rep struct {
		Complete     bool              `json:"complete"`
		Findings     []json.RawMessage `json:"findings"`
		Accepted     []struct{ Kind string }
		AcceptedFrom string `json:"accepted_from"`
		Partitions   []struct {
			Findings int    `json:"findings"`
			Status   string `json:"status"`
		} `json:"partitions"`
	}
	_, out, _ = floe(t, append(audit, "--accept", baseline, "--json")...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Complete || len(rep.Findings) != 0 || len(rep.Accepted) != 1 ||
		rep.Accepted[0].Kind != "lost" || rep.AcceptedFrom != baseline || rep.Partitions[0].Findings != 0 || rep.Partitions[0].Status != "complete" {
		t.Fatalf("audit --accept --json: %+v (%v)\n%s", rep, err, out)
	}
	html := filepath.Join(t.TempDir(), "r.html")
	mustFloe(t, append(audit, "--accept", baseline, "--html", html)...)
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), `id="accepted-table"`) || !strings.Contains(string(b), `data-complete="true"`) {
		t.Errorf("HTML report with --accept: %v", err)
	}

	// A new loss is not the reviewed one.
	lose(35)
	code, out, errs = floe(t, append(audit, "--accept", baseline)...)
	if code != exitFindings || !strings.Contains(out, "FINDINGS\n- ledger lost pay/0 [30, 35)") || !strings.Contains(out, "verdict: NOT COMPLETE, 1 finding: 1 lost; besides, accepted") {
		t.Fatalf("audit --accept after a second loss: exit %d\n%s\n%s", code, out, errs)
	}

	other := filepath.Join(t.TempDir(), "other.json")
	if err := os.WriteFile(other, []byte(strings.Replace(reviewed, `"table": "lake.pay"`, `"table": "lake.other"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := floe(t, append(audit, "--accept", other)...); code != exitError || !strings.Contains(errs, "it is the audit of lake.other (branch main), not of lake.pay") {
		t.Errorf("--accept of another table's report: exit %d\n%s", code, errs)
	}
	if code, _, errs := floe(t, append(audit, "--accept", html)...); code != exitError || !strings.Contains(errs, "not a floe audit JSON report") {
		t.Errorf("--accept of an HTML report: exit %d\n%s", code, errs)
	}
}

// TestAuditNotesWhereTheSinkBegan (from a new-user run): a new table sunk
// from a log whose start retention had deleted is complete from where the
// sink began, and the report now says which partition began where (its
// notes were empty while a replay of the same log recorded a loss).
func TestAuditNotesWhereTheSinkBegan(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "late", 2, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "late", 2, 10, map[int32]int64{})
	if err := st.Cluster.DeleteRecords("late", 1, 4); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "late", "--table", "lake.late", "--stop-at-end"}, loc...)...)
	var rep struct {
		Complete bool     `json:"complete"`
		Notes    []string `json:"notes"`
	}
	out := mustFloe(t, append([]string{"audit", "--table", "lake.late", "--brokers", st.Brokers[0], "--json"}, loc[:2]...)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Complete || len(rep.Notes) != 1 ||
		!strings.HasPrefix(rep.Notes[0], "the ledger records that the sink began late/1 at offset 4 (") {
		t.Fatalf("audit: %+v (%v)\n%s", rep, err, out)
	}
}

// TestAuditNotesWhereTheReplayBegan (from a new-user run): a replay
// --from a time begins each partition where the time falls, and records
// the time (floe.replay.from-time). The audit's notes said a sink began
// the partitions (a new table on a log retention had cut, or --start
// latest); they name the replay from that time now: in the replay's own
// table, on a replay's branch, and on main once that branch is
// published.
func TestAuditNotesWhereTheReplayBegan(t *testing.T) {
	st, loc := replayStack(t)
	base := stampedTopic(t, st, "since", [][]time.Duration{{0, 1, 2, 3, 4, 1000, 1001, 1002}}, 0)
	from := base.Add(500 * time.Second).UTC()
	brokers := []string{"--brokers", st.Brokers[0]}
	notes := func(args ...string) []string {
		t.Helper()
		var rep struct {
			Complete bool     `json:"complete"`
			Notes    []string `json:"notes"`
		}
		out := mustFloe(t, append(append(append([]string{"audit", "--json"}, args...), brokers...), loc...)...)
		if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Complete {
			t.Fatalf("audit %q: %+v (%v)\n%s", args, rep, err, out)
		}
		return rep.Notes
	}
	expect := func(got []string, key string) {
		t.Helper()
		begin := fmt.Sprintf("the ledger records that the replay --from %s (table property %s) began since/0 at offset 5: the table claims nothing below it", from.Format(time.RFC3339Nano), key)
		retained := "; the broker retains since/0 [0, 5) below it, which the table does not hold"
		if !slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, begin) && strings.HasSuffix(n, retained) }) {
			t.Errorf("no note %q...%q among %q", begin, retained, got)
		}
		for _, n := range got {
			if strings.Contains(n, "--start latest") || strings.Contains(n, "a sink started at the latest offset") {
				t.Errorf("note naming a sink's start: %q", n)
			}
		}
	}
	replay := append(append([]string{"replay", "--topic", "since", "--from", from.Format(time.RFC3339)}, brokers...), loc...)
	mustFloe(t, append(replay, "--table", "lake.since")...)
	expect(notes("--table", "lake.since"), "floe.replay.from-time")

	mustFloe(t, append(append([]string{"sink", "--topic", "since", "--table", "lake.main", "--stop-at-end"}, brokers...), loc...)...)
	mustFloe(t, append(replay, "--table", "lake.main", "--branch", "rebuild")...)
	expect(notes("--table", "lake.main", "--branch", "rebuild"), "floe.replay.from-time.rebuild")
	if got := notes("--table", "lake.main"); len(got) != 0 {
		t.Errorf("main, from offset 0: notes %q", got)
	}
	mustFloe(t, append(replay, "--table", "lake.main", "--branch", "rebuild", "--publish", "--publish-different")...)
	expect(notes("--table", "lake.main"), "floe.replay.from-time.rebuild")
	// A sink's commits on the published main keep the branch's ledger.
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "since", Value: []byte("after"), Timestamp: base.Add(2000 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, append(append([]string{"sink", "--topic", "since", "--table", "lake.main", "--stop-at-end"}, brokers...), loc...)...)
	expect(notes("--table", "lake.main"), "floe.replay.from-time.rebuild")
}
