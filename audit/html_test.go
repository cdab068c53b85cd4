package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/browser"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// gapLossTable builds, with the real sink and the kfake broker, a table of
// topic "orders" whose partition 0 is complete, partition 1 has a gap
// [100, 110) and partition 2 lost [50, 80) to retention (recorded), and
// then produces 20 more records to partitions 0 and 1 (lag).
func gapLossTable(t *testing.T, e *env) *snapshot.Table {
	t.Helper()
	const topic = "orders"
	e.Topic(topic, 3, nil)
	e.Produce(records(topic, 0, 100, "a"))
	e.Produce(records(topic, 1, 100, "a"))
	e.Produce(records(topic, 2, 50, "a"))
	tbl := e.Table("lake.orders")
	e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 40})
	tp1 := mapping.TopicPartition{Topic: topic, Partition: 1}
	forceCommit(t, tbl, tp1, 110, 120, span(110, 120)) // skips [100, 110)
	e.Produce(records(topic, 1, 30, "b"))
	e.Produce(records(topic, 2, 50, "b"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 2, 80); err != nil {
		t.Fatal(err)
	}
	e.sink(tbl, connector.Config{Topic: topic, OnDataLoss: connector.LossRecord})
	e.Produce(records(topic, 0, 20, "c"))
	e.Produce(records(topic, 1, 20, "c"))
	return tbl
}

// writeReports writes rep as HTML and JSON files and returns their paths.
func writeReports(t *testing.T, rep *audit.Report, name string) (htmlPath, jsonPath string) {
	t.Helper()
	var h, j bytes.Buffer
	if err := rep.WriteHTML(&h); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&j); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	htmlPath, jsonPath = filepath.Join(dir, name+".html"), filepath.Join(dir, name+".json")
	if err := os.WriteFile(htmlPath, h.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(jsonPath, j.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, h.String())
	return htmlPath, jsonPath
}

// checkSelfContained fails when the document would fetch anything: no
// script, no stylesheet or image link, no URL but its own anchors.
func checkSelfContained(t *testing.T, doc string) {
	t.Helper()
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)<script`), regexp.MustCompile(`(?i)<link`), regexp.MustCompile(`(?i)<img`),
		regexp.MustCompile(`(?i)\bsrc=`), regexp.MustCompile(`(?i)@import`),
		regexp.MustCompile(`(?i)(href|url)\(?=?["']?(https?:|//)`),
	} {
		if loc := bad.FindStringIndex(doc); loc != nil {
			t.Fatalf("the HTML report is not self-contained: %q at %d", doc[loc[0]:min(len(doc), loc[1]+40)], loc[0])
		}
	}
}

// jsonReport is the part of the JSON report the browser tests compare.
type jsonReport struct {
	Complete   bool `json:"complete"`
	Partitions []struct {
		Topic      string     `json:"topic"`
		Partition  int32      `json:"partition"`
		Gaps       [][2]int64 `json:"gaps"`
		Overlaps   [][2]int64 `json:"overlaps"`
		Lost       [][2]int64 `json:"lost"`
		Lag        *int64     `json:"lag"`
		Next       *int64     `json:"next"`
		LastStable *int64     `json:"last_stable"`
	} `json:"partitions"`
	Evidence struct {
		Digest string `json:"digest"`
	} `json:"evidence"`
}

// domMark is a mark of a coverage bar as the browser laid it out: its
// data attributes, and its left edge and width as fractions of its bar.
type domMark struct {
	Kind  string  `json:"kind"`
	Low   int64   `json:"low"`
	High  int64   `json:"high"`
	X     float64 `json:"x"`
	W     float64 `json:"w"`
	Fill  string  `json:"fill"`
	Track string  `json:"track"`
}

type domPartition struct {
	Low   int64     `json:"low"`
	High  int64     `json:"high"`
	Marks []domMark `json:"marks"`
}

type domReport struct {
	Verdict    string                  `json:"verdict"`
	Complete   string                  `json:"complete"`
	Digest     string                  `json:"digest"`
	Summary    []string                `json:"summary"`
	Partitions map[string]domPartition `json:"partitions"`
	Findings   []string                `json:"findings"`
}

// readDOM loads the report in the browser and reads what it laid out.
func readDOM(t *testing.T, htmlPath string, shot string) domReport {
	t.Helper()
	ctx := browser.New(t, time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+htmlPath), chromedp.WaitVisible("#verdict")); err != nil {
		t.Fatalf("load %s: %v", htmlPath, err)
	}
	dom, err := chromedp.Run(ctx, chromedp.Evaluate[domReport](`(() => {
		const out = {partitions: {}, summary: [], findings: []};
		const v = document.getElementById('verdict');
		out.verdict = v.innerText; out.complete = v.dataset.complete;
		out.digest = document.getElementById('digest').innerText;
		for (const tr of document.querySelectorAll('#partitions tbody tr')) out.summary.push(tr.dataset.partition + ' ' + tr.dataset.status);
		for (const tr of document.querySelectorAll('#findings-table tbody tr')) out.findings.push(tr.dataset.level + ' ' + tr.dataset.kind + ' ' + (tr.dataset.low ?? '') + '-' + (tr.dataset.high ?? ''));
		for (const sec of document.querySelectorAll('section.partition')) {
			const marks = [];
			for (const r of sec.querySelectorAll('rect[data-kind]')) {
				const bar = r.ownerSVGElement, s = bar.getBoundingClientRect(), b = r.getBoundingClientRect();
				const inner = s.width - bar.clientLeft * 2;
				marks.push({kind: r.dataset.kind, low: +r.dataset.low, high: +r.dataset.high, track: bar.dataset.track,
					x: (b.left - s.left - bar.clientLeft) / inner, w: b.width / inner, fill: getComputedStyle(r).fill});
			}
			out.partitions[sec.dataset.partition] = {low: +sec.dataset.low, high: +sec.dataset.high, marks};
		}
		return out;
	})()`))
	if err != nil {
		t.Fatalf("read the report's DOM: %v", err)
	}
	browser.Screenshot(t, ctx, shot)
	return dom
}

// placed checks that the browser drew a mark of kind over [low, high) of
// partition p, to scale: its left edge at (low - bar low) / (bar length).
func placed(t *testing.T, dom domReport, p, kind string, low, high int64) {
	t.Helper()
	dp, ok := dom.Partitions[p]
	if !ok {
		t.Fatalf("no section for partition %s", p)
	}
	for _, m := range dp.Marks {
		if m.Kind != kind || m.Low != low || m.High != high {
			continue
		}
		want := float64(low-dp.Low) / float64(dp.High-dp.Low)
		wantW := max(float64(high-low)/float64(dp.High-dp.Low), 0.002)
		if math.Abs(m.X-want) > 0.01 || math.Abs(m.W-wantW) > 0.01 {
			t.Fatalf("%s %s [%d, %d) drawn at %.3f width %.3f of the bar; want %.3f width %.3f", p, kind, low, high, m.X, m.W, want, wantW)
		}
		if !strings.Contains(m.Fill, "pat-") && !strings.HasPrefix(m.Fill, "rgb") {
			t.Fatalf("%s %s has no fill: %q", p, kind, m.Fill)
		}
		return
	}
	t.Fatalf("partition %s: no %s mark [%d, %d); marks %+v", p, kind, low, high, dp.Marks)
}

// TestHTMLReportGapAndLoss renders the audit of a table with a gap, a
// recorded loss and lag in headless Chromium, and checks that every gap
// and loss of the JSON report of the same audit is drawn where it is, and
// the lag too.
func TestHTMLReportGapAndLoss(t *testing.T) {
	e := newEnv(t)
	tbl := gapLossTable(t, e)
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker()})
	expectFindings(t, rep, "ledger gap orders/1 [100, 110)", "ledger lost orders/2 [50, 80)")
	htmlPath, jsonPath := writeReports(t, rep, "gap-loss")
	var js jsonReport
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}

	dom := readDOM(t, htmlPath, "audit-gap-loss.png")
	if dom.Complete != "false" || !strings.Contains(dom.Verdict, "NOT COMPLETE") || !strings.Contains(dom.Verdict, "2 findings: 1 gap, 1 lost") {
		t.Errorf("verdict %q (complete %s)", dom.Verdict, dom.Complete)
	}
	if dom.Digest != js.Evidence.Digest {
		t.Errorf("digest %q, JSON report has %q", dom.Digest, js.Evidence.Digest)
	}
	// Problem partitions first, then the one that only lags.
	if want := []string{"orders/1 findings", "orders/2 findings", "orders/0 complete"}; strings.Join(dom.Summary, ",") != strings.Join(want, ",") {
		t.Errorf("summary order %q, want %q", dom.Summary, want)
	}
	if want := []string{"ledger gap 100-110", "ledger lost 50-80"}; strings.Join(dom.Findings, ",") != strings.Join(want, ",") {
		t.Errorf("findings %q, want %q", dom.Findings, want)
	}
	drawn := 0
	for _, p := range js.Partitions {
		name := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
		for _, g := range p.Gaps {
			placed(t, dom, name, "gap", g[0], g[1])
			drawn++
		}
		for _, l := range p.Lost {
			placed(t, dom, name, "lost", l[0], l[1])
			drawn++
		}
		if p.Lag != nil && *p.Lag > 0 {
			placed(t, dom, name, "lag", *p.LastStable-*p.Lag, *p.LastStable)
			drawn++
		}
		n := 0
		for _, m := range dom.Partitions[name].Marks {
			if m.Kind == "gap" || m.Kind == "lost" || m.Kind == "overlap" {
				n++
			}
		}
		if n != len(p.Gaps)+len(p.Lost)+len(p.Overlaps) {
			t.Errorf("%s: %d gap, lost and overlap marks; the JSON report has %d", name, n, len(p.Gaps)+len(p.Lost)+len(p.Overlaps))
		}
	}
	if drawn != 4 { // a gap, a loss, two partitions lagging
		t.Errorf("checked %d marks, want 4", drawn)
	}
	// The ledger's ranges of partition 1 are drawn one by one: the
	// sink's flushes from 0 to 100, then the forced [110, 120) and the
	// resumed [120, 130).
	var ranges []string
	next := int64(0)
	for _, m := range dom.Partitions["orders/1"].Marks {
		if m.Kind != "range" {
			continue
		}
		if m.Low != next && !(next == 100 && m.Low == 110) {
			t.Errorf("orders/1: range [%d, %d) after one ending at %d", m.Low, m.High, next)
		}
		next = m.High
		ranges = append(ranges, fmt.Sprintf("[%d, %d)", m.Low, m.High))
	}
	if len(ranges) < 4 || next != 130 || !strings.HasSuffix(strings.Join(ranges, " "), "[110, 120) [120, 130)") {
		t.Errorf("ranges of orders/1 %q", ranges)
	}
}

// TestHTMLReportClean renders the audit of a complete table at every
// level: the verdict says so and no bar has a gap, an overlap or a loss.
func TestHTMLReportClean(t *testing.T) {
	e := newEnv(t)
	const topic = "payments"
	e.Topic(topic, 3, nil)
	tbl := e.Table("lake.payments")
	for run := range 3 {
		for p := range int32(3) {
			e.Produce(records(topic, p, 40+10*int(p), fmt.Sprint("run", run)))
		}
		e.sink(tbl, connector.Config{Topic: topic, FlushRecords: 30})
	}
	rep := auditEveryLevel(t, e, tbl)
	htmlPath, _ := writeReports(t, rep, "clean")
	dom := readDOM(t, htmlPath, "audit-clean.png")
	if dom.Complete != "true" || !strings.Contains(dom.Verdict, "COMPLETE: every offset of 3 partitions is accounted for by the ledger, the file list, the data files' rows and the log's records, up to the end of the log") {
		t.Errorf("verdict %q", dom.Verdict)
	}
	if len(dom.Partitions) != 3 || len(dom.Findings) != 0 {
		t.Fatalf("partitions %d, findings %q", len(dom.Partitions), dom.Findings)
	}
	for name, p := range dom.Partitions {
		var covered int64
		for _, m := range p.Marks {
			switch m.Kind {
			case "gap", "overlap", "lost", "lag", "finding":
				t.Errorf("%s: %s mark [%d, %d) in a complete table", name, m.Kind, m.Low, m.High)
			case "range":
				covered += m.High - m.Low
			}
		}
		if covered != p.High-p.Low {
			t.Errorf("%s: ranges cover %d offsets of the bar's %d", name, covered, p.High-p.Low)
		}
	}
}

// TestHTMLReportDeadLetters: the report of a typed table draws the ranges
// that sent records to the dead-letter table, with their counts from the
// ledger, and counts them per partition.
func TestHTMLReportDeadLetters(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	jsonLog(e, "orders", `{"id":1}`, ``, `{"id":2}`, `{"id":"x"}`, `{"id":3}`)
	e.sink(tbl, connector.Config{Topic: "orders", DeadLetters: dlq, FlushRecords: 2})
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker()})
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	checkSelfContained(t, doc)
	var sum int
	for _, m := range regexp.MustCompile(`data-kind="dead-letters" data-low="(\d+)" data-high="(\d+)" data-count="(\d+)"`).FindAllStringSubmatch(doc, -1) {
		var low, high, n int
		fmt.Sscan(m[1]+" "+m[2]+" "+m[3], &low, &high, &n)
		if low < 0 || high > 5 || low >= high {
			t.Errorf("dead-letter mark [%d, %d) outside the partition's [0, 5)", low, high)
		}
		sum += n
	}
	if sum != 2 {
		t.Errorf("dead-letter marks count %d dead letters, the ledger has 2", sum)
	}
	if !strings.Contains(doc, `<span>dead letters</span> <b class="mono">2</b>`) || !strings.Contains(doc, `<span>rows read</span> <b class="mono">3 and 2 dead letters</b>`) {
		t.Errorf("the partition's dead letters are not counted:\n%s", doc[strings.Index(doc, `<section class="partition`):])
	}
}

// TestHTMLReportUpsertTable: the report of an upsert table, loaded in
// headless Chromium, names its mode and key columns, and per partition the
// upserts, deletes and skipped records the ledger counts: for a table
// keyed by the Kafka key, and for one replay --fold latest wrote (keyed by
// topic, partition and key; records without a key skipped).
func TestHTMLReportUpsertTable(t *testing.T) {
	e := newEnv(t)
	keyed := upsertedTopic(t, e, "accounts")
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Run(e.Ctx, e.Broker(), cat, []string{"lake", "folded"}, replay.Options{Topic: "accounts", Fold: mapping.FoldLatest,
		Sink: connector.Config{FlushRecords: 40, Logger: quietLogger()}}); err != nil {
		t.Fatal(err)
	}
	folded := e.Table("lake.folded")
	for _, c := range []struct {
		tbl  *snapshot.Table
		key  string
		skip bool
	}{{keyed, "kafka_key", false}, {folded, "kafka_topic, kafka_partition, kafka_key", true}} {
		rep := e.audit(c.tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker()})
		htmlPath, _ := writeReports(t, rep, "upsert")
		ctx := browser.New(t, time.Minute)
		if err := chromedp.Do(ctx, chromedp.Navigate("file://"+htmlPath), chromedp.WaitVisible("#verdict")); err != nil {
			t.Fatal(err)
		}
		type row struct{ Upserts, Deletes, Skipped string }
		dom, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
			Mode, Key string
			Parts     map[string]row
			Facts     []string
		}](`(() => {
			const m = document.getElementById('mode'), parts = {};
			for (const tr of document.querySelectorAll('#partitions tbody tr')) {
				const f = n => tr.querySelector('td[data-field=' + n + ']')?.textContent;
				parts[tr.dataset.partition] = {Upserts: f('records'), Deletes: f('deletes'), Skipped: f('skipped')};
			}
			const facts = [...document.querySelectorAll('section.partition .facts div')].map(d => d.innerText);
			return {Mode: m.dataset.mode, Key: m.dataset.key, Parts: parts, Facts: facts};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		browser.Screenshot(t, ctx, "report-upsert.png")
		if dom.Mode != "upsert" || dom.Key != c.key {
			t.Errorf("%s: mode %q key %q, want upsert keyed by %s", c.tbl.Name(), dom.Mode, dom.Key, c.key)
		}
		var skipped int64
		for _, p := range rep.Partitions {
			var d, s int64
			for _, r := range p.LedgerRanges {
				d, s = d+r.Deletes, s+r.Skipped
			}
			skipped += s
			want := row{fmt.Sprint(p.Records), fmt.Sprint(d), fmt.Sprint(s)}
			if got := dom.Parts[fmt.Sprintf("%s/%d", p.Topic, p.Partition)]; got != want || d == 0 {
				t.Errorf("%s %s: upserts, deletes, skipped %+v; the ledger counts %+v", c.tbl.Name(), p.TopicPartition, got, want)
			}
		}
		if (skipped > 0) != c.skip || !slices.ContainsFunc(dom.Facts, func(f string) bool { return strings.HasPrefix(f, "deletes (ledger)") }) {
			t.Errorf("%s: %d skipped, facts %v", c.tbl.Name(), skipped, dom.Facts)
		}
	}
}

// TestHTMLReportDeadLetterShare (from two new users' reports): one commit
// of 20 offsets that sent 1 record to the dead-letter table was drawn as
// high as the bar, as if all 20 were dead letters (the ledger counts a
// range's dead letters, not where they are). Its mark is as high as their
// share, and its title says of how many offsets.
func TestHTMLReportDeadLetterShare(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	values := []string{`{"id":"x"}`}
	for i := range 19 {
		values = append(values, fmt.Sprintf(`{"id":"%d"}`, i))
	}
	values[7] = `not json`
	jsonLog(e, "orders", values...)
	e.sink(tbl, connector.Config{Topic: "orders", DeadLetters: dlq})
	rep := e.audit(tbl, audit.Options{})
	var b bytes.Buffer
	if err := rep.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`data-kind="dead-letters" data-low="0" data-high="20" data-count="1" x="[0-9.]+" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)"><title>([^<]*)</title>`).FindStringSubmatch(b.String())
	if m == nil || m[1] != "20.40" || m[2] != "3.60" || !strings.Contains(m[3], "sent 1 record of their 20 offsets to the dead-letter table") {
		t.Errorf("the dead-letter mark of one dead letter in 20 offsets: %q; want it 3.6 of the bar's 24 high, its title naming the 20 offsets", m)
	}
}
