package audit

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/floe-dev/floe/mapping"
)

// Accept sets aside the findings of r that baseline, an earlier JSON
// report (WriteJSON) of the same table and branch, lists too: same level,
// kind, partition, offsets, file, snapshot and detail. The detail counts:
// some findings say only there what they concern (the topic a
// topic-recreated finding is about, how many dead letters are stray), and
// a finding whose wording a later floe changes is reported again, which
// errs on the side of an alert (found by review).
// An operator who has reviewed a finding (a loss recorded with
// --on-data-loss record, which stays in the ledger for good) accepts it,
// and the audit fails again only on a finding the baseline does not have
// (a new loss, or the same one grown), or on the accepted findings of a
// partition one of whose reviewed findings is gone (the partition changed
// since the review; every partition's, for a data file of several). A
// report written with Accept can be a baseline in turn (its accepted
// findings count). name says where the baseline came from, for the
// report.
func (r *Report) Accept(baseline []byte, name string) error {
	var base jsonReport
	if err := json.Unmarshal(baseline, &base); err != nil {
		return fmt.Errorf("read the findings to accept from %s: not a floe audit JSON report (write one with floe audit --json > FILE): %w", name, err)
	}
	if base.Schema != JSONSchema {
		return fmt.Errorf("read the findings to accept from %s: not a floe audit JSON report (schema %q, not %q): write one with floe audit --json > FILE", name, base.Schema, JSONSchema)
	}
	if base.Table != r.Table || base.Branch != r.Branch {
		return fmt.Errorf("read the findings to accept from %s: it is the audit of %s (branch %s), not of %s (branch %s): give a report of this table's audit",
			name, base.Table, base.Branch, r.Table, r.Branch)
	}
	// Only the findings this audit could have met count as gone when it
	// does not meet them: a cheaper nightly audit, or one of one --topic,
	// did not look for the others (found by review).
	topics := map[string]bool{}
	logStart := map[mapping.TopicPartition]int64{}
	for _, p := range r.Partitions {
		topics[p.Topic] = true
		if p.Broker != nil {
			logStart[p.TopicPartition] = p.Broker.LogStart
		}
	}
	// A content finding about offsets retention has deleted since cannot
	// be met again either (found by review).
	unread := func(f jsonFinding) bool {
		if f.Level != LevelContent || f.Topic == nil || f.Partition == nil || f.Offsets == nil {
			return false
		}
		start, ok := logStart[mapping.TopicPartition{Topic: *f.Topic, Partition: *f.Partition}]
		return ok && f.Offsets[1] <= start
	}
	known, checked := map[string]bool{}, map[string]jsonFinding{}
	for _, f := range append(base.Findings, base.Accepted...) {
		k := findingKey(f)
		known[k] = true
		if slices.Contains(r.Levels, f.Level) && (f.Topic == nil || topics[*f.Topic]) && !unread(f) {
			checked[k] = f
		}
	}
	keys := make([]string, len(r.Findings))
	matched := map[string]bool{}
	for i, f := range r.Findings {
		keys[i] = findingKey(jsonFindingOf(f))
		matched[keys[i]] = known[keys[i]]
	}
	// A reviewed finding not found again changed its partition: the
	// partition's other findings were reviewed with it, and are reported
	// again. A file another engine rewrote left a missing-file finding
	// worded alike when it deleted the rewrite's rows too (found by
	// review). A data file's finding that names no partition (a file of
	// several) changed the table: every accepted finding is reported
	// again. Others that name none (a pending dead letter added since, a
	// topic another audit looked at) change no partition (found by review).
	gone, changed, all := 0, map[string]bool{}, false
	for k, f := range checked {
		if matched[k] {
			continue
		}
		gone++
		if f.Topic != nil && f.Partition != nil {
			changed[mapping.TopicPartition{Topic: *f.Topic, Partition: *f.Partition}.String()] = true
		}
		for _, o := range f.OtherPartitions {
			changed[mapping.TopicPartition{Topic: o.Topic, Partition: o.Partition}.String()] = true
		}
		all = all || f.Partition == nil && len(f.OtherPartitions) == 0 && f.File != nil && slices.Contains(dataFileKinds, f.Kind)
	}
	uncount := map[string]int{}
	var kept []Finding
	reopened := 0
	for i, f := range r.Findings {
		if !known[keys[i]] {
			kept = append(kept, f)
			continue
		}
		parts := []string{}
		if f.HasPartition {
			parts = append(parts, f.Partition.String())
		}
		for _, o := range f.Others {
			parts = append(parts, o.String())
		}
		if all || slices.ContainsFunc(parts, func(p string) bool { return changed[p] }) {
			kept = append(kept, f)
			reopened++
			continue
		}
		r.Accepted = append(r.Accepted, f)
		for _, p := range parts {
			uncount[p]++
		}
	}
	for i := range r.Partitions {
		r.Partitions[i].Findings -= uncount[r.Partitions[i].TopicPartition.String()]
	}
	r.Findings = kept
	r.AcceptedFrom = name
	if gone > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s of %s not found again: repaired, or changed (a finding whose offsets grew is a new one)",
			plural(gone, "finding"), name))
	}
	if reopened > 0 {
		what := "a finding of the same partition is not found again, so the partition changed since the review"
		if all {
			what = "a finding of no one partition (a file of several) is not found again, so the table changed since the review"
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%s of %s reported again: %s; review it and accept a new report",
			plural(reopened, "finding"), name, what))
	}
	return nil
}

// dataFileKinds are the kinds of finding about a data file, which hold the
// rows of partitions.
var dataFileKinds = []Kind{KindForeignFile, KindMissingFile, KindStrayFile, KindFileContent}

// findingKey identifies a finding across audits: everything the JSON
// report says of it.
func findingKey(f jsonFinding) string {
	b, _ := json.Marshal(f) // strings and numbers: it cannot fail
	return string(b)
}
