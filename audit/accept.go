package audit

import (
	"encoding/json"
	"fmt"
	"slices"
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
// and the audit fails again only on a finding the baseline does not have:
// a new loss, or the same one grown. A report written with Accept can be
// a baseline in turn (its accepted findings count). name says where the
// baseline came from, for the report.
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
	for _, p := range r.Partitions {
		topics[p.Topic] = true
	}
	known, checked := map[string]bool{}, map[string]bool{}
	for _, f := range append(base.Findings, base.Accepted...) {
		k := findingKey(f)
		known[k] = true
		if slices.Contains(r.Levels, f.Level) && (f.Topic == nil || topics[*f.Topic]) {
			checked[k] = true
		}
	}
	uncount := map[string]int{}
	var kept []Finding
	matched := map[string]bool{}
	for _, f := range r.Findings {
		key := findingKey(jsonFindingOf(f))
		if !known[key] {
			kept = append(kept, f)
			continue
		}
		matched[key] = true
		r.Accepted = append(r.Accepted, f)
		if f.HasPartition {
			uncount[f.Partition.String()]++
		}
		for _, o := range f.Others {
			uncount[o.String()]++
		}
	}
	for i := range r.Partitions {
		r.Partitions[i].Findings -= uncount[r.Partitions[i].TopicPartition.String()]
	}
	r.Findings = kept
	r.AcceptedFrom = name
	gone := 0
	for k := range checked {
		if !matched[k] {
			gone++
		}
	}
	if gone > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%s of %s not found again: repaired, or changed (a finding whose offsets grew is a new one)",
			plural(gone, "finding"), name))
	}
	return nil
}

// findingKey identifies a finding across audits: everything the JSON
// report says of it.
func findingKey(f jsonFinding) string {
	b, _ := json.Marshal(f) // strings and numbers: it cannot fail
	return string(b)
}
