package audit

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/mapping"
)

// bigReport is the report of a large table, built without a table: 300
// partitions of 5,000 ranges each (1.5 million ranges); partition 7 has
// 40 one-offset gaps spread over it and dead letters in every tenth range,
// partition 250 lags.
func bigReport() *Report {
	r := &Report{Table: "lake.big", Branch: "main", Levels: []Level{LevelLedger, LevelFiles, LevelBroker},
		Started: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Duration: 95 * time.Millisecond,
		Evidence: Evidence{Digest: "sha256:00", MetadataLocation: "file:///w/lake.db/big/metadata/00001.metadata.json", SnapshotID: 1, Commits: 5000}}
	for p := range int32(300) {
		tp := mapping.TopicPartition{Topic: "big", Partition: p}
		pr := PartitionReport{TopicPartition: tp, InLedger: true, Rows: -1, Started: true}
		var low int64
		for i := range 5000 {
			if p == 7 && i%125 == 124 {
				pr.Gaps = append(pr.Gaps, mapping.Interval{Low: low, High: low + 1})
				r.Findings = append(r.Findings, Finding{Level: LevelLedger, Kind: KindGap, Partition: tp, HasPartition: true,
					Offsets: mapping.Interval{Low: low, High: low + 1}, HasOffsets: true, Detail: "gap"})
				low++
			}
			rg := mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: low, High: low + 200}, Records: 200}
			if p == 7 && i%10 == 0 {
				rg.Records, rg.DeadLetters = 198, 2
			}
			pr.LedgerRanges = append(pr.LedgerRanges, rg)
			pr.Ranges++
			pr.Records += rg.Records
			pr.DeadLetters += rg.DeadLetters
			low += 200
		}
		pr.Next = low
		pr.Broker = &BrokerState{LastStable: low, HighWatermark: low}
		if p == 250 {
			pr.Broker = &BrokerState{LastStable: low + 5000, HighWatermark: low + 5000, Lag: 5000}
		}
		if p == 7 {
			pr.Findings = len(pr.Gaps)
		}
		r.Partitions = append(r.Partitions, pr)
	}
	return r
}

// TestHTMLLargeTable: a table of hundreds of partitions and a million
// ranges gives a document of bounded size that opens on its problem
// partitions, whose bars draw runs instead of ranges and whose gaps are
// each drawn.
func TestHTMLLargeTable(t *testing.T) {
	var b strings.Builder
	if err := bigReport().WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	if len(doc) > 2<<20 {
		t.Errorf("the report of 300 partitions takes %d bytes", len(doc))
	}
	rows := regexp.MustCompile(`<tr data-partition="([^"]+)"`).FindAllStringSubmatch(doc, -1)
	if len(rows) != 300 || rows[0][1] != "big/7" || rows[1][1] != "big/250" || rows[2][1] != "big/0" {
		t.Fatalf("summary rows: %d, first %v", len(rows), rows[:3])
	}
	sections := regexp.MustCompile(`(?s)<section class="partition[^"]*" id="p-big-(\d+)".*?</section>`).FindAllStringSubmatch(doc, -1)
	if len(sections) != 300 || sections[0][1] != "7" {
		t.Fatalf("%d sections, first %v", len(sections), sections[0][1])
	}
	p7 := sections[0][0]
	count := func(kind string) int { return strings.Count(p7, `data-kind="`+kind+`"`) }
	// The runs between gaps one offset wide are too close to tell apart
	// at this scale: one mark stands for them, the gaps are drawn over it.
	if count("range") != 0 || count("run") != 1 || !strings.Contains(p7, `data-kind="run" data-low="0" data-high="1000040" data-count="5000"`) {
		t.Errorf("partition 7: %d range marks, %d run marks; want one run mark", count("range"), count("run"))
	}
	if count("gap") != 40 {
		t.Errorf("partition 7: %d gap marks, want 40", count("gap"))
	}
	if !strings.Contains(p7, `<b class="mono">1000</b>`) || count("dead-letters") == 0 {
		t.Errorf("partition 7: its 1000 dead letters are not shown")
	}
	if !strings.Contains(p7, "and 20 more (the JSON report lists them all)") {
		t.Errorf("partition 7 lists its 40 gaps in full")
	}
	// One gap is one offset of a bar of a million: drawn 0.2% wide.
	if !regexp.MustCompile(`data-kind="gap" data-low="24800" data-high="24801" data-count="1" x="[\d.]+" y="0" width="2.00"`).MatchString(p7) {
		t.Errorf("the first gap is not drawn at the minimum width:\n%.2000s", p7)
	}
}

// Marks less than one unit of the bar apart are merged, and the merged
// mark says how many intervals it stands for.
func TestHTMLMarksMerge(t *testing.T) {
	s := scale{0, 1_000_000}
	ivs := []mapping.Interval{{Low: 10, High: 11}, {Low: 500, High: 501}, {Low: 900, High: 901}, {Low: 500_000, High: 500_010}}
	ms := s.marks("gap", ivs, nil, offsetsTitle("gap"))
	if len(ms) != 2 || ms[0].Count != 3 || ms[0].Low != 10 || ms[0].High != 901 || ms[1].Count != 1 {
		t.Fatalf("marks %+v", ms)
	}
	if got := fmt.Sprint(ms[0].X, " ", ms[0].W); got != "0.00 2.00" {
		t.Errorf("a merged mark near the start: x, w = %s", got)
	}
	if m := s.mark("gap", 999_999, 1_000_000, 1, ""); m.X != "998.00" || m.W != "2.00" {
		t.Errorf("a mark at the end is clamped into the bar: %+v", m)
	}
}
