package audit

import (
	"bytes"
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// TestAcceptedMissingRowsNotCalledComplete (from a new-user run): a
// reviewer accepted a deep audit's missing-file and count-mismatch
// findings (a data file deleted: every row of the partition gone). The
// audit with --accept said "COMPLETE, every offset of 1 partition is
// accounted for" and the HTML report showed a clean table: accepting a
// finding does not put the rows back. The verdict says so, and a recorded
// loss accepted alone still reads as before.
func TestAcceptedMissingRowsNotCalledComplete(t *testing.T) {
	tp := mapping.TopicPartition{Topic: "orders", Partition: 0}
	missing := Finding{Level: LevelFiles, Kind: KindMissingFile, Partition: tp, HasPartition: true,
		Offsets: mapping.Interval{Low: 0, High: 10}, HasOffsets: true, File: "s3://w/a.parquet", SnapshotID: 7, Detail: "gone"}
	count := Finding{Level: LevelRows, Kind: KindCountMismatch, Partition: tp, HasPartition: true,
		Offsets: mapping.Interval{Low: 0, High: 10}, HasOffsets: true, Detail: "0 rows, 10 records"}
	lost := Finding{Level: LevelLedger, Kind: KindLost, Partition: tp, HasPartition: true,
		Offsets: mapping.Interval{Low: 10, High: 15}, HasOffsets: true, Detail: "lost"}
	report := func(findings ...Finding) *Report {
		r := acceptReport(findings...)
		r.Levels = []Level{LevelLedger, LevelFiles, LevelRows}
		r.Partitions = []PartitionReport{{TopicPartition: tp, InLedger: true, First: 0, Next: 15, Ranges: 2, Records: 10, Findings: len(findings)}}
		return r
	}
	accepted := func(findings ...Finding) (text, html, js string) {
		var base bytes.Buffer
		if err := report(findings...).WriteJSON(&base); err != nil {
			t.Fatal(err)
		}
		r := report(findings...)
		if err := r.Accept(base.Bytes(), "reviewed.json"); err != nil {
			t.Fatal(err)
		}
		var tb, hb, jb bytes.Buffer
		if err := r.WriteText(&tb); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteHTML(&hb); err != nil {
			t.Fatal(err)
		}
		if err := r.WriteJSON(&jb); err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(tb.String()), " "), hb.String(), strings.Join(strings.Fields(jb.String()), " ")
	}

	text, html, js := accepted(missing, count, lost)
	for _, want := range []string{"verdict: COMPLETE AS ACCEPTED, accepted findings say rows of 1 partition are missing from the table or differ from their records; every other offset of 1 partition",
		"accepted as in reviewed.json, 3 findings: 1 missing-file, 1 count-mismatch, 1 lost"} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "every offset of") {
		t.Errorf("text report claims every offset:\n%s", text)
	}
	for _, want := range []string{`class="verdict accepted"`, "&#x26A0; COMPLETE AS ACCEPTED", "1 with rows missing as accepted",
		`data-status="accepted-missing"`, "rows missing (2 accepted findings)"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if strings.Contains(html, "&#x2714; COMPLETE") || strings.Contains(html, `data-status="complete"`) {
		t.Error("HTML report shows a clean table")
	}

	// The JSON report kept complete: true with nothing to tell a script
	// that rows are missing as accepted.
	for _, want := range []string{`"complete": true, "verdict": "COMPLETE AS ACCEPTED"`, `"accepted_rows_missing": 2`} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON report lacks %q:\n%s", want, js)
		}
	}

	text, html, js = accepted(lost)
	if !strings.Contains(text, "verdict: COMPLETE, every offset of 1 partition") || !strings.Contains(html, "&#x2714; COMPLETE</strong>") ||
		!strings.Contains(js, `"verdict": "COMPLETE"`) || strings.Contains(js, "accepted_rows_missing") {
		t.Errorf("an accepted loss alone:\n%s\n%s", text, js)
	}
}
