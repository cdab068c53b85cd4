package audit

import (
	"cmp"
	"embed"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/floe-dev/floe/mapping"
)

// The HTML report is one self-contained file: html/template fills
// report.html.tmpl (inline CSS, inline SVG, no script and no fetch), so that
// it can be archived beside the JSON report, mailed, opened offline and
// printed. Every mark of a coverage bar carries data-kind, data-low and
// data-high (and data-count when it stands for several intervals), so a
// test or a script reads from the DOM what the bar shows.

//go:embed report.html.tmpl
var htmlFS embed.FS

var htmlTmpl = template.Must(template.New("report.html.tmpl").ParseFS(htmlFS, "report.html.tmpl"))

const (
	// barWidth is the width of a coverage bar in SVG user units; marks are
	// placed to scale on it.
	barWidth = 1000.0
	// minMarkWidth is the narrowest mark drawn (0.2% of the bar), so that a
	// single offset of a long partition still shows; a mark widened to it
	// stays centred on its offsets.
	minMarkWidth = 2.0
	// maxDrawnRanges is the most ranges a partition's bar draws one by
	// one; beyond it, touching ranges collapse into runs.
	maxDrawnRanges = 100
	// maxListed bounds the intervals of one kind listed in words under a
	// bar, and maxHTMLFindings the findings listed; the JSON report has
	// them all.
	maxListed       = 20
	maxHTMLFindings = 1000
)

// htmlMark is one rectangle of a coverage bar: offsets [Low, High) of one
// kind, placed at X with width W (SVG user units, formatted).
type htmlMark struct {
	Kind      string
	Alt       bool // every other range is drawn in a lighter shade
	Low, High int64
	// Count is the number of intervals (or ranges) the mark stands for.
	Count int
	// Finding is the kind of finding a mark of the findings bar shows.
	Finding Kind
	X, W    string
	// Y and H place the mark vertically in the bar's 24 units: the whole
	// height, but for dead letters, whose height is their share of the
	// offsets of the ranges that sent them.
	Y, H  string
	Title string
}

// htmlTrack is one bar of a partition: the ledger's, the dead letters',
// the broker's or the findings of the other levels.
type htmlTrack struct {
	Name, Label string
	Marks       []htmlMark
}

// htmlList is a kind of interval listed in words under a bar.
type htmlList struct {
	Label string
	Items []string
	More  int
}

type htmlPartition struct {
	Anchor, Name string
	PartitionReport
	Problem bool
	// Missing is set when accepted findings say rows of the partition are
	// missing or differ (Report.acceptedMissing).
	Missing bool
	// GapOffsets, OverlapOffsets and LostOffsets count the offsets of the
	// ledger's findings, as the text report does.
	GapOffsets, OverlapOffsets, LostOffsets int64
	// Deletes and Skipped sum the ledger ranges' counts of records that
	// deleted their key and that an upsert table skipped on purpose
	// (Records counts the upserts).
	Deletes, Skipped int64
	Lag              string
	Status           string
	// Low and High are the offsets at the bar's ends.
	Low, High int64
	Tracks    []htmlTrack
	Lists     []htmlList
	Facts     [][2]string
	Empty     string
}

type htmlFinding struct {
	Finding
	Where, Anchor string
	// Also links the other partitions the finding concerns
	// (Finding.Others).
	Also []htmlLink
}

// htmlLink is a link to a partition's section.
type htmlLink struct{ Name, Anchor string }

type htmlLevel struct {
	Level Level
	Ran   bool
	How   string
}

type htmlView struct {
	*Report
	AuditedAt, Duration string
	Verdict, Read       string
	// VerdictHead is COMPLETE, COMPLETE AS ACCEPTED or NOT COMPLETE.
	VerdictHead string
	// RowsMissing is set when the audit is complete but accepted findings
	// say rows are missing or differ (Report.acceptedMissing); Missing
	// counts the partitions they name.
	RowsMissing  bool
	Missing      int
	Levels       []htmlLevel
	Parts        []htmlPartition
	PartsCount   string
	Problems     int
	TotalLag     int64
	Findings     []htmlFinding
	MoreFindings int
	// Accepted are the findings --accept set aside (Report.Accepted).
	Accepted       []htmlFinding
	RangesDrawnMax int
	ListedMax      int
	// Upsert is set for an upsert table, whose key columns KeyColumns
	// lists (comma-separated), and whose partitions count upserts, deletes
	// and skipped records.
	Upsert     bool
	KeyColumns string
}

// WriteHTML writes the report as one self-contained HTML document (inline
// CSS and SVG, no script, nothing fetched): the audit's identity and
// verdict, a summary of the partitions with the problem partitions first,
// per partition a coverage bar drawn to scale, the findings with their
// evidence, the notes and the evidence digest with how to re-verify it.
// It prints on paper as it reads on screen.
func (r *Report) WriteHTML(w io.Writer) error {
	v := htmlView{
		Report:         r,
		AuditedAt:      r.Started.UTC().Format(time.RFC3339),
		Duration:       r.Duration.Round(time.Millisecond).String(),
		RangesDrawnMax: maxDrawnRanges,
		ListedMax:      maxListed,
	}
	if r.Mode == mapping.ModeUpsert {
		v.Upsert = true
		v.KeyColumns = r.UpsertKey
		if k, err := mapping.ParseUpsertKey(r.UpsertKey); err == nil && len(k.Columns) > 0 {
			v.KeyColumns = strings.Join(k.Columns, ", ")
		}
	}
	v.Read = plural(r.Evidence.Commits, "ledger commit")
	if slices.Contains(r.Levels, LevelFiles) {
		v.Read += ", " + plural(r.Files, "live data file")
	}
	v.Read += r.readPhrase()
	v.VerdictHead, v.Verdict = r.verdict()
	how := map[Level]string{
		LevelLedger:  "snapshot summaries (always)",
		LevelFiles:   "manifests (default)",
		LevelRows:    "partition and offset columns (--deep)",
		LevelBroker:  "the broker's watermarks (--brokers)",
		LevelContent: "the retained log, record by record (--verify-content)",
	}
	if len(r.Brokers) > 0 {
		how[LevelBroker] = "the watermarks of " + r.brokersPhrase() + " (--brokers)"
	}
	for _, l := range []Level{LevelLedger, LevelFiles, LevelRows, LevelBroker, LevelContent} {
		v.Levels = append(v.Levels, htmlLevel{Level: l, Ran: slices.Contains(r.Levels, l), How: how[l]})
	}
	byPart := map[mapping.TopicPartition][]Finding{}
	for _, f := range r.Findings {
		if f.HasPartition {
			byPart[f.Partition] = append(byPart[f.Partition], f)
		}
		for _, o := range f.Others {
			byPart[o] = append(byPart[o], f)
		}
	}
	missing, _ := r.acceptedMissing()
	v.RowsMissing = v.VerdictHead == verdictAccepted
	for _, p := range r.Partitions {
		hp := htmlPartitionOf(p, byPart[p.TopicPartition], slices.Contains(r.Levels, LevelFiles), v.Upsert)
		if hp.Problem {
			v.Problems++
		}
		// A partition whose accepted findings say rows are missing is not
		// shown as clean: accepting them did not put the rows back.
		if n := missing[p.TopicPartition]; n > 0 && !hp.Problem {
			hp.Missing = true
			hp.Status = "rows missing (" + plural(n, "accepted finding") + ")"
			v.Missing++
		}
		if p.Broker != nil {
			v.TotalLag += p.Broker.Lag
		}
		v.Parts = append(v.Parts, hp)
	}
	// Problem partitions first (most findings first, then most lag), so
	// that a table of hundreds of partitions opens on what needs reading.
	slices.SortStableFunc(v.Parts, func(a, b htmlPartition) int {
		return cmp.Or(-cmp.Compare(a.Findings, b.Findings), -cmp.Compare(lagOf(a.PartitionReport), lagOf(b.PartitionReport)))
	})
	v.PartsCount = plural(len(v.Parts), "partition")
	v.Findings, v.MoreFindings = htmlFindings(r.Findings)
	v.Accepted, _ = htmlFindings(r.Accepted)
	if err := htmlTmpl.Execute(w, v); err != nil {
		return fmt.Errorf("write audit report as HTML: %w", err)
	}
	return nil
}

// htmlFindings are findings as the report lists them, at most
// maxHTMLFindings, and how many more there are.
func htmlFindings(findings []Finding) (list []htmlFinding, more int) {
	for i, f := range findings {
		if i == maxHTMLFindings {
			return list, len(findings) - i
		}
		hf := htmlFinding{Finding: f}
		hf.Detail = f.textDetail() // for a person, as the text report's
		if f.HasPartition {
			hf.Where, hf.Anchor = partName(f.Partition), anchor(f.Partition)
			for _, o := range f.Others {
				hf.Also = append(hf.Also, htmlLink{Name: partName(o), Anchor: anchor(o)})
			}
		}
		list = append(list, hf)
	}
	return list, 0
}

func lagOf(p PartitionReport) int64 {
	if p.Broker == nil {
		return 0
	}
	return p.Broker.Lag
}

// anchor is the id of a partition's section. Topic names hold only
// [a-zA-Z0-9._-], which are valid in an id.
func anchor(tp mapping.TopicPartition) string {
	return fmt.Sprintf("p-%s-%d", cmp.Or(tp.Topic, "unknown-topic"), tp.Partition)
}

// scale maps offsets [lo, hi) onto a bar.
type scale struct{ lo, hi int64 }

func (s scale) x(o int64) float64 {
	return float64(o-s.lo) / float64(s.hi-s.lo) * barWidth
}

// mark places [low, high) on the bar, at least minMarkWidth wide.
func (s scale) mark(kind string, low, high int64, count int, title string) htmlMark {
	x, w := s.x(low), s.x(high)-s.x(low)
	if w < minMarkWidth {
		x = min(max(x+w/2-minMarkWidth/2, 0), barWidth-minMarkWidth)
		w = minMarkWidth
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	return htmlMark{Kind: kind, Low: low, High: high, Count: count, X: f(x), W: f(w), Y: "0", H: "24", Title: title}
}

// marks places sorted intervals of one kind, merging those less than one
// unit of the bar apart into one mark so that a partition with thousands of
// them draws what a reader can see. counts, when not nil, are what each
// interval stands for (ranges of a run, dead letters of a range); the
// mark's Count is their sum, or the number of intervals it merges. title
// describes a mark from its offsets, its Count and the intervals merged.
func (s scale) marks(kind string, ivs []mapping.Interval, counts []int, title func(iv mapping.Interval, count, merged int) string) []htmlMark {
	type group struct {
		iv            mapping.Interval
		count, merged int
	}
	var gs []group
	for i, iv := range ivs {
		n := 1
		if counts != nil {
			n = counts[i]
		}
		if k := len(gs); k > 0 && s.x(iv.Low)-s.x(gs[k-1].iv.High) < 1 {
			gs[k-1].iv.High = max(gs[k-1].iv.High, iv.High)
			gs[k-1].count += n
			gs[k-1].merged++
			continue
		}
		gs = append(gs, group{iv, n, 1})
	}
	out := make([]htmlMark, 0, len(gs))
	for _, g := range gs {
		out = append(out, s.mark(kind, g.iv.Low, g.iv.High, g.count, title(g.iv, g.count, g.merged)))
	}
	return out
}

func offsetsTitle(what string) func(mapping.Interval, int, int) string {
	return func(iv mapping.Interval, _, merged int) string {
		if merged > 1 {
			return fmt.Sprintf("%s: %d intervals within %s, too close to tell apart at this scale", what, merged, iv)
		}
		return fmt.Sprintf("%s %s: %s", what, iv, plural(iv.Len(), "offset"))
	}
}

func htmlPartitionOf(p PartitionReport, findings []Finding, filesRan, upsert bool) htmlPartition {
	hp := htmlPartition{Anchor: anchor(p.TopicPartition), Name: partName(p.TopicPartition), PartitionReport: p,
		Problem: p.Findings > 0, Lag: "-", Status: "complete",
		GapOffsets: total(p.Gaps), OverlapOffsets: total(p.Overlaps), LostOffsets: total(p.Lost)}
	if p.Findings > 0 {
		hp.Status = plural(p.Findings, "finding")
	}
	if b := p.Broker; b != nil {
		hp.Lag = strconv.FormatInt(b.Lag, 10)
		if b.Lag > 0 && p.Findings == 0 {
			hp.Status = "complete, lagging"
		}
	}
	data := make([]mapping.Range, 0, len(p.LedgerRanges))
	for _, r := range p.LedgerRanges {
		if !r.Deleted() && r.Len() > 0 {
			data = append(data, r)
		}
	}
	mapping.SortRanges(data)

	// The bar spans everything it shows: the ledger's coverage, the
	// broker's log and the offsets of every finding.
	var lo, hi int64
	set := false
	extend := func(l, h int64) {
		if !set {
			lo, hi, set = l, h, true
			return
		}
		lo, hi = min(lo, l), max(hi, h)
	}
	if p.InLedger {
		extend(p.First, p.Next)
	}
	if b := p.Broker; b != nil {
		extend(b.LogStart, b.HighWatermark)
	}
	for _, f := range findings {
		if f.HasOffsets {
			extend(f.Offsets.Low, f.Offsets.High)
		}
	}
	hp.Low, hp.High = lo, hi
	for _, r := range p.LedgerRanges {
		hp.Deletes += r.Deletes
		hp.Skipped += r.Skipped
	}
	hp.Facts = partitionFacts(hp, filesRan, upsert)
	if hi <= lo {
		hp.Empty = "no offsets to draw: the ledger holds only where the sink starts this partition, and no record has been sunk yet"
		if !p.InLedger {
			hp.Empty = "no offsets to draw: the partition is empty on the broker"
		}
		return hp
	}
	s := scale{lo, hi}

	if p.InLedger {
		t := htmlTrack{Name: "ledger", Label: "ledger"}
		if len(data) <= maxDrawnRanges {
			for i, r := range data {
				m := s.mark("range", r.Low, r.High, 1, fmt.Sprintf("range %s: %s", r.Interval, plural(r.Records, "row")))
				m.Alt = i%2 == 1
				t.Marks = append(t.Marks, m)
			}
		} else {
			var runs []mapping.Interval
			var counts []int
			for _, r := range data {
				if k := len(runs); k > 0 && r.Low <= runs[k-1].High {
					runs[k-1].High = max(runs[k-1].High, r.High)
					counts[k-1]++
					continue
				}
				runs = append(runs, r.Interval)
				counts = append(counts, 1)
			}
			t.Marks = s.marks("run", runs, counts, func(iv mapping.Interval, n, merged int) string {
				if merged > 1 {
					return fmt.Sprintf("%s: %d runs of touching ranges (%s), too close to tell apart at this scale; what lies between them is drawn over them",
						iv, merged, plural(n, "range"))
				}
				return fmt.Sprintf("%s sunk by %s", iv, plural(n, "range"))
			})
		}
		t.Marks = append(t.Marks, s.marks("aborted", p.Aborted, nil, offsetsTitle("deleted, held only aborted records"))...)
		t.Marks = append(t.Marks, s.marks("lost", p.Lost, nil, offsetsTitle("lost to retention"))...)
		t.Marks = append(t.Marks, s.marks("overlap", p.Overlaps, nil, offsetsTitle("overlap"))...)
		t.Marks = append(t.Marks, s.marks("gap", p.Gaps, nil, offsetsTitle("gap"))...)
		hp.Tracks = append(hp.Tracks, t)
	}
	if p.DeadLetters > 0 {
		var ivs []mapping.Interval
		var counts []int
		for _, r := range data {
			if r.DeadLetters == 0 {
				continue
			}
			if k := len(ivs); k > 0 && r.Low <= ivs[k-1].High {
				ivs[k-1].High = max(ivs[k-1].High, r.High)
				counts[k-1] += int(r.DeadLetters)
				continue
			}
			ivs = append(ivs, r.Interval)
			counts = append(counts, int(r.DeadLetters))
		}
		marks := s.marks("dead-letters", ivs, counts, func(iv mapping.Interval, n, _ int) string {
			return fmt.Sprintf("ranges within %s sent %s of their %s to the dead-letter table", iv, plural(n, "record"), plural(int(iv.Len()), "offset"))
		})
		// The ledger counts a range's dead letters, not where they are:
		// a mark as high as the bar drew a range of 300 offsets with one
		// dead letter as 300 of them (two new users' reports).
		for i, m := range marks {
			h := 24 * min(1, max(0.15, float64(m.Count)/float64(max(1, m.High-m.Low))))
			marks[i].Y, marks[i].H = strconv.FormatFloat(24-h, 'f', 2, 64), strconv.FormatFloat(h, 'f', 2, 64)
		}
		hp.Tracks = append(hp.Tracks, htmlTrack{Name: "dead-letters", Label: "dead letters", Marks: marks})
	}
	if b := p.Broker; b != nil {
		t := htmlTrack{Name: "broker", Label: "broker log"}
		if lo < b.LogStart {
			t.Marks = append(t.Marks, s.mark("deleted", lo, b.LogStart, 1,
				fmt.Sprintf("%s: deleted from the log by retention (or never written)", mapping.Interval{Low: lo, High: b.LogStart})))
		}
		if b.HighWatermark > b.LogStart {
			t.Marks = append(t.Marks, s.mark("retained", b.LogStart, b.HighWatermark, 1,
				fmt.Sprintf("retained log [log start %d, high watermark %d)", b.LogStart, b.HighWatermark)))
		}
		if b.Lag > 0 {
			from := b.LastStable - b.Lag
			t.Marks = append(t.Marks, s.mark("lag", from, b.LastStable, 1,
				fmt.Sprintf("lag %s: retained, not sunk yet (%s)", mapping.Interval{Low: from, High: b.LastStable}, plural(b.Lag, "offset"))))
		}
		hp.Tracks = append(hp.Tracks, t)
	}
	// Findings of the levels after the ledger that name offsets; the
	// ledger's own (gaps, overlaps, losses) are on the ledger bar.
	var other []htmlMark
	for _, f := range findings {
		if f.Level == LevelLedger || !f.HasOffsets {
			continue
		}
		m := s.mark("finding", f.Offsets.Low, f.Offsets.High, 1, fmt.Sprintf("%s %s %s: %s", f.Level, f.Kind, f.Offsets, f.textDetail()))
		m.Finding = f.Kind
		other = append(other, m)
	}
	if len(other) > 0 {
		hp.Tracks = append(hp.Tracks, htmlTrack{Name: "findings", Label: "other findings", Marks: other})
	}

	list := func(label string, ivs []mapping.Interval) {
		if len(ivs) == 0 {
			return
		}
		l := htmlList{Label: label}
		for i, iv := range ivs {
			if i == maxListed {
				l.More = len(ivs) - i
				break
			}
			l.Items = append(l.Items, fmt.Sprintf("%s (%s)", iv, plural(iv.Len(), "offset")))
		}
		hp.Lists = append(hp.Lists, l)
	}
	list("gaps", p.Gaps)
	list("overlaps", p.Overlaps)
	list("lost to retention", p.Lost)
	list("deleted, held only aborted records (not a loss)", p.Aborted)
	return hp
}

// partitionFacts are the numbers printed beside a partition's bar; "-"
// marks what a level that did not run would have said.
func partitionFacts(hp htmlPartition, filesRan, upsert bool) [][2]string {
	p := hp.PartitionReport
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	var f [][2]string
	if p.InLedger {
		start := "not recorded"
		if p.Started {
			start = "recorded"
		}
		f = append(f, [2]string{"first offset", n(p.First)}, [2]string{"next offset", n(p.Next)}, [2]string{"ranges", strconv.Itoa(p.Ranges)})
		if upsert {
			f = append(f, [2]string{"upserts (ledger)", n(p.Records)}, [2]string{"deletes (ledger)", n(hp.Deletes)}, [2]string{"skipped (ledger)", n(hp.Skipped)})
		} else {
			f = append(f, [2]string{"rows (ledger)", n(p.Records)})
		}
		f = append(f, [2]string{"dead letters", n(p.DeadLetters)}, [2]string{"start", start},
			[2]string{"gap offsets", n(total(p.Gaps))}, [2]string{"overlap offsets", n(total(p.Overlaps))},
			[2]string{"lost offsets", n(total(p.Lost))})
	} else {
		f = append(f, [2]string{"ledger", "never sunk"})
	}
	files, rows := "-", "-"
	if filesRan {
		files = strconv.Itoa(p.Files)
	}
	if p.Rows >= 0 {
		rows = n(p.Rows)
		if p.DeadLetters > 0 {
			rows += " and " + plural(p.DeadLettersRead, "dead letter")
		}
	}
	f = append(f, [2]string{"live files", files}, [2]string{"rows read", rows})
	if b := p.Broker; b != nil {
		f = append(f, [2]string{"log start", n(b.LogStart)}, [2]string{"last stable", n(b.LastStable)},
			[2]string{"high watermark", n(b.HighWatermark)}, [2]string{"lag", n(b.Lag)})
	}
	if c := p.Content; c != nil {
		f = append(f, [2]string{"rows verified", n(c.Verified)},
			[2]string{"markers, aborted, compacted", fmt.Sprintf("%d, %d, %d", c.Markers, c.Aborted, c.Compacted)},
			[2]string{"unverifiable rows", n(c.Unverifiable)})
		if p.DeadLetters > 0 {
			f = append(f, [2]string{"dead letters verified", n(c.DeadLetters)})
		}
	}
	return f
}
