package audit

import (
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/mapping"
)

// TestTextWideTopicFoldsPartitionsWithoutFindings: the text report of a
// 500-partition topic printed 500 lines of "ok" (a user's run on a wide
// topic). Above 16 partitions, those without findings are summed per
// topic; a partition with findings, and one only the broker knows, keep
// their own line. The JSON report still lists each.
func TestTextWideTopicFoldsPartitionsWithoutFindings(t *testing.T) {
	r := &Report{Table: "lake.wide", Branch: "main", Levels: []Level{LevelLedger},
		Started: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), Evidence: Evidence{Digest: "sha256:00", SnapshotID: 1, Commits: 3}}
	for p := int32(0); p < 500; p++ {
		tp := mapping.TopicPartition{Topic: "wide", Partition: p}
		pr := PartitionReport{TopicPartition: tp, InLedger: true, Rows: -1, Next: 40, Ranges: 2, Records: 40, Broker: &BrokerState{Lag: 1}}
		if p == 7 {
			pr.Gaps, pr.Findings = []mapping.Interval{{Low: 10, High: 12}}, 1
		}
		r.Partitions = append(r.Partitions, pr)
	}
	r.Partitions = append(r.Partitions, PartitionReport{TopicPartition: mapping.TopicPartition{Topic: "wide", Partition: 500}, Broker: &BrokerState{Lag: 5}})
	r.Findings = []Finding{{Level: LevelLedger, Kind: KindGap, Partition: mapping.TopicPartition{Topic: "wide", Partition: 7}, HasPartition: true,
		Offsets: mapping.Interval{Low: 10, High: 12}, HasOffsets: true}}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if n := strings.Count(out, "\n"); n > 30 {
		t.Errorf("text report of 501 partitions has %d lines:\n%s", n, out)
	}
	for _, want := range []string{"wide/0-6,8-499 (499 partitions)", "998 19960", "499 ok", "wide/7 ", "1 FINDING", "wide/500 ", "--json and --html list each"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	var js strings.Builder
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(js.String(), `"partition":`); n < 501 {
		t.Errorf("JSON report lists %d partitions, want every one", n)
	}
}
