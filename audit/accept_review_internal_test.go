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

func lostFinding(tp mapping.TopicPartition) Finding {
	return Finding{Level: LevelLedger, Kind: KindLost, Partition: tp, HasPartition: true,
		Offsets: mapping.Interval{Low: 10, High: 15}, HasOffsets: true, Detail: "offsets deleted by retention before they were sunk"}
}

// TestAcceptTopicAuditKeepsOthersAccepted: the reviewed (whole-table) report has
// orders' ledger topic-recreated finding (it names no partition) and a
// recorded loss of payments/0. A nightly audit with --topic payments does
// not look at orders, so cannot meet the orders finding; Accept takes it for
// gone, and as it names no partition, reopened every accepted finding: the
// reviewed loss of payments/0 failed the audit again (from a review).
func TestAcceptTopicAuditKeepsOthersAccepted(t *testing.T) {
	pay := mapping.TopicPartition{Topic: "payments", Partition: 0}
	ord := mapping.TopicPartition{Topic: "orders", Partition: 0}
	recreated := Finding{Level: LevelLedger, Kind: KindTopicRecreated,
		Detail: "the ledger holds ranges of topic orders read from 2 different topics of that name (topic IDs x, y): its offsets mix records of a deleted topic and of its successor"}
	reviewed := acceptReport(recreated, lostFinding(pay))
	reviewed.Partitions = []PartitionReport{{TopicPartition: ord, InLedger: true, Next: 100}, {TopicPartition: pay, InLedger: true, Next: 100}}
	var base bytes.Buffer
	if err := reviewed.WriteJSON(&base); err != nil {
		t.Fatal(err)
	}
	nightly := acceptReport(lostFinding(pay)) // --topic payments
	nightly.Partitions = []PartitionReport{{TopicPartition: pay, InLedger: true, Next: 100}}
	if err := nightly.Accept(base.Bytes(), "reviewed.json"); err != nil {
		t.Fatal(err)
	}
	if len(nightly.Findings) != 0 {
		t.Errorf("audit --topic payments: the reviewed loss of payments/0 is reported again (%d findings, %d accepted); notes: %q", len(nightly.Findings), len(nightly.Accepted), nightly.Notes)
	}
}

// TestAcceptPendingDeadLettersAddedKeepsOthersAccepted: the reviewed report has a
// recorded loss of orders/0 and a dead-letters-pending finding (a sink
// stopped between its commit and adding the dead letters). floe maintain
// adds them, as the finding says it will: the pending finding is gone, and
// Accept reopened the reviewed loss, saying "a finding of no one partition
// (a file of several) ... the table changed" (from a review).
func TestAcceptPendingDeadLettersAddedKeepsOthersAccepted(t *testing.T) {
	ord := mapping.TopicPartition{Topic: "orders", Partition: 0}
	pending := Finding{Level: LevelLedger, Kind: KindDeadLettersPending, File: "file:///w/lake.db/orders_dlq/data/x.parquet", SnapshotID: 7,
		Detail: "commit c (snapshot 7) counts 1 dead letters that are not in lake.orders_dlq yet; its 1 dead-letter files are there: the next floe sink session or floe maintain adds them"}
	reviewed := acceptReport(lostFinding(ord), pending)
	reviewed.Partitions = []PartitionReport{{TopicPartition: ord, InLedger: true, Next: 100}}
	var base bytes.Buffer
	if err := reviewed.WriteJSON(&base); err != nil {
		t.Fatal(err)
	}
	nightly := acceptReport(lostFinding(ord))
	nightly.Partitions = []PartitionReport{{TopicPartition: ord, InLedger: true, Next: 100}}
	if err := nightly.Accept(base.Bytes(), "reviewed.json"); err != nil {
		t.Fatal(err)
	}
	if len(nightly.Findings) != 0 {
		t.Errorf("pending dead letters added since: the reviewed loss of orders/0 is reported again (%d findings, %d accepted); notes: %q", len(nightly.Findings), len(nightly.Accepted), nightly.Notes)
	}
}
