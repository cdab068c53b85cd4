package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/mapping"
)

// TestReviewS63DiffTextFoldKeepsAcceptedGaps: with --accept, a partition
// whose gap a reviewed baseline accepted counts no finding, but the gap
// is still there. The text report of a wide topic folded it into the
// line of partitions without findings, whose GAPS column it writes as 0:
// the table said no offset of the topic was missing.
func TestReviewS63DiffTextFoldKeepsAcceptedGaps(t *testing.T) {
	report := func() *Report {
		r := &Report{Table: "lake.wide", Branch: "main", Levels: []Level{LevelLedger},
			Started: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), Evidence: Evidence{Digest: "sha256:00", SnapshotID: 1, Commits: 3}}
		for p := int32(0); p < 20; p++ {
			pr := PartitionReport{TopicPartition: mapping.TopicPartition{Topic: "wide", Partition: p}, InLedger: true, Rows: -1, Next: 40, Ranges: 2, Records: 40}
			if p == 7 {
				pr.Gaps, pr.Findings, pr.Records = []mapping.Interval{{Low: 10, High: 12}}, 1, 38
			}
			r.Partitions = append(r.Partitions, pr)
		}
		r.Findings = []Finding{{Level: LevelLedger, Kind: KindGap, Partition: mapping.TopicPartition{Topic: "wide", Partition: 7}, HasPartition: true,
			Offsets: mapping.Interval{Low: 10, High: 12}, HasOffsets: true}}
		return r
	}
	var baseline strings.Builder
	if err := report().WriteJSON(&baseline); err != nil {
		t.Fatal(err)
	}
	r := report()
	if err := r.Accept([]byte(baseline.String()), "reviewed.json"); err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 0 || len(r.Accepted) != 1 {
		t.Fatalf("accept: %d findings, %d accepted; want 0 and 1", len(r.Findings), len(r.Accepted))
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var gaps bool
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 10 && f[0] == "wide/7" && f[5] == "2" {
			gaps = true
		}
	}
	if !gaps {
		t.Errorf("the partition table shows no line with the 2 offsets of wide/7's accepted gap:\n%s", out)
	}
}
