package audit

import (
	"bytes"
	"testing"
	"time"
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
