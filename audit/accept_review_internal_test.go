package audit

import (
	"bytes"
	"testing"
	"time"

	"github.com/floe-dev/floe/mapping"
)

func acceptReport(findings ...Finding) *Report {
	return &Report{Table: "lake.t", Branch: "main", Levels: []Level{LevelLedger},
		Started: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Evidence: Evidence{Digest: "sha256:00", SnapshotID: 1, Commits: 1},
		Findings: findings}
}

// TestAcceptTellsFindingsApartByWhatTheyConcern (from a review):
// Accept matches a finding by everything the JSON report says of it but
// its detail (level, kind, partition, offsets, file, snapshot). Several
// findings carry none of these, and say what they concern in the detail
// alone: the ledger's topic-recreated names the topic only there. Once
// one topic-recreated finding is accepted, every later one is too: a
// second topic of the table deleted and recreated (its offsets now mixing
// records of two topics) is set aside as "accepted", and the audit exits 0
// with "verdict: COMPLETE". docs/audit.md and --help promise that "a new
// finding ... still does" fail the audit.
func TestAcceptTellsFindingsApartByWhatTheyConcern(t *testing.T) {
	recreated := func(topic string) Finding {
		return Finding{Level: LevelLedger, Kind: KindTopicRecreated,
			Detail: "the ledger holds ranges of topic " + topic + " read from 2 different topics of that name (topic IDs x, y): its offsets mix records of a deleted topic and of its successor"}
	}
	var base bytes.Buffer
	if err := acceptReport(recreated("orders")).WriteJSON(&base); err != nil {
		t.Fatal(err)
	}
	r := acceptReport(recreated("orders"), recreated("payments"))
	if err := r.Accept(base.Bytes(), "reviewed.json"); err != nil {
		t.Fatal(err)
	}
	if r.Complete() || len(r.Findings) != 1 {
		t.Errorf("accepted %d findings, left %d (complete %v): the reviewed finding was about topic orders; topic payments being recreated is a new one", len(r.Accepted), len(r.Findings), r.Complete())
	}
}

// TestAcceptDoesNotCallUnauditedFindingsRepaired (from a review): the
// note Accept adds for a baseline finding not met again says it was
// "repaired, or changed". A nightly audit at a cheaper level than the
// reviewed one (the review ran --verify-content; cron runs the ledger
// level), or with --topic, never looked for it: the note tells the
// operator a content-mismatch or a loss of another topic was repaired when
// nothing was checked. Findings of levels (or topics) the audit did not
// run are neither met nor gone.
func TestAcceptDoesNotCallUnauditedFindingsRepaired(t *testing.T) {
	tp := Finding{}.Partition
	tp.Topic, tp.Partition = "orders", 0
	content := Finding{Level: LevelContent, Kind: KindContentMismatch, Partition: tp, HasPartition: true}
	content.Offsets.Low, content.Offsets.High, content.HasOffsets = 41, 42, true
	reviewed := acceptReport(content)
	reviewed.Levels = []Level{LevelLedger, LevelFiles, LevelBroker, LevelContent}
	var base bytes.Buffer
	if err := reviewed.WriteJSON(&base); err != nil {
		t.Fatal(err)
	}
	nightly := acceptReport() // ledger level only: content never checked
	if err := nightly.Accept(base.Bytes(), "reviewed.json"); err != nil {
		t.Fatal(err)
	}
	for _, n := range nightly.Notes {
		if bytes.Contains([]byte(n), []byte("repaired")) {
			t.Errorf("a ledger-level audit notes: %q; the content level did not run, so nothing says the content-mismatch was repaired", n)
		}
	}
}

// TestAcceptRetentionKeepsPartitionAccepted: a reviewed report (with
// --verify-content) holds, for orders/0, a recorded loss and a
// content-mismatch at offset 41. Retention has since deleted offset 41:
// the nightly audit's log starts at 100, so the content level could not
// read the record and cannot have met the finding; nothing about the
// partition changed. Accept took the finding for gone and reported the
// reviewed loss again (from a review): the audit failed every night once
// retention passed an accepted content finding, one it could not meet.
func TestAcceptRetentionKeepsPartitionAccepted(t *testing.T) {
	tp := mapping.TopicPartition{Topic: "orders", Partition: 0}
	lost := Finding{Level: LevelLedger, Kind: KindLost, Partition: tp, HasPartition: true,
		Offsets: mapping.Interval{Low: 10, High: 15}, HasOffsets: true, Detail: "offsets deleted by retention before they were sunk"}
	content := Finding{Level: LevelContent, Kind: KindContentMismatch, Partition: tp, HasPartition: true,
		Offsets: mapping.Interval{Low: 41, High: 42}, HasOffsets: true, Detail: "the row differs from its record"}
	levels := []Level{LevelLedger, LevelFiles, LevelBroker, LevelContent}
	reviewed := acceptReport(lost, content)
	reviewed.Levels = levels
	reviewed.Partitions = []PartitionReport{{TopicPartition: tp, InLedger: true, First: 0, Next: 200,
		Broker: &BrokerState{LogStart: 0, LastStable: 200, HighWatermark: 200}}}
	var base bytes.Buffer
	if err := reviewed.WriteJSON(&base); err != nil {
		t.Fatal(err)
	}
	nightly := acceptReport(lost)
	nightly.Levels = levels
	nightly.Partitions = []PartitionReport{{TopicPartition: tp, InLedger: true, First: 0, Next: 200,
		Broker: &BrokerState{LogStart: 100, LastStable: 200, HighWatermark: 200}}}
	if err := nightly.Accept(base.Bytes(), "reviewed.json"); err != nil {
		t.Fatal(err)
	}
	if len(nightly.Findings) != 0 {
		t.Errorf("the reviewed loss is reported again (%d findings, %d accepted); notes: %q", len(nightly.Findings), len(nightly.Accepted), nightly.Notes)
	}
}
