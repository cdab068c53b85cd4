package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/mapping"
)

// TestHTMLNamesOtherPartitions: a finding about a file group's ranges
// together counts for each of its partitions (Finding.Others): the text
// report names them, and the HTML report draws it on each partition's bar
// and links each from the findings table (it did under the first only).
// From a review.
func TestHTMLNamesOtherPartitions(t *testing.T) {
	tp0 := mapping.TopicPartition{Topic: "g", Partition: 0}
	tp1 := mapping.TopicPartition{Topic: "g", Partition: 1}
	r := &Report{Table: "lake.g", Branch: "main", Levels: []Level{LevelLedger, LevelFiles},
		Started: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Evidence: Evidence{Digest: "sha256:00", SnapshotID: 1, Commits: 1}}
	for _, tp := range []mapping.TopicPartition{tp0, tp1} {
		r.Partitions = append(r.Partitions, PartitionReport{TopicPartition: tp, InLedger: true, Rows: -1, Started: true, Next: 10, Ranges: 1, Records: 10,
			LedgerRanges: []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: 10}, Records: 10}}})
	}
	r.Findings = []Finding{{Level: LevelFiles, Kind: KindCountMismatch, Partition: tp0, HasPartition: true, Others: []mapping.TopicPartition{tp1},
		Offsets: mapping.Interval{Low: 0, High: 10}, HasOffsets: true, SnapshotID: 1, Detail: "the 2 ranges g/0 [0, 10), g/1 [0, 10) ... hold 15 rows"}}
	r.Partitions[0].Findings, r.Partitions[1].Findings = 1, 1
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "also concerns") {
		t.Fatalf("text report does not name the other partitions:\n%s", text.String())
	}
	var b strings.Builder
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	// The findings table's row links the finding to g/0 only; g/1's
	// section has no findings track.
	i := strings.Index(html, `<h2 id="findings">`)
	findings := html[i:]
	if !strings.Contains(findings, "g/1") || strings.Count(html, `data-finding="`) < 2 {
		t.Errorf("HTML report: the finding counted for g/1 is neither linked to g/1 nor drawn on its bar (finding marks on bars: %d)", strings.Count(html, `data-finding="`))
	}
}
