package audit_test

import (
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestAmbiguousCompactedFileBesideSinkGroup: one table holds topic A, sunk
// into a file group of several partitions (still live, never compacted),
// and partition 0 of topic B at the same offsets, compacted into one file.
// The two topic names share their first 16 characters, so the compacted
// file's (truncated) topic bounds admit both: its chain of (A, 0) and of
// (B, 0) are both unbroken, the file is ambiguous, and the ranges of both
// chains are not judged. The table is correct: the files level must find
// nothing. (Before 637a888: the range (A, 0) was unattributed, so the file
// group's set was not judged. After: joinedCounts skips the range (A, 0)
// altogether, so the group's set is judged without its records: a false
// count mismatch.)
func TestAmbiguousCompactedFileBesideSinkGroup(t *testing.T) {
	e := newEnv(t)
	const topicA, topicB = "reviewlongprefix_alpha", "reviewlongprefix_beta"
	tbl, _ := groupedTable(t, e, topicA)
	b := mapping.TopicPartition{Topic: topicB, Partition: 0}
	commit(t, tbl, b, 0, 1000, span(0, 1000))
	commit(t, tbl, b, 1000, 2000, span(1000, 2000))
	l := must(tbl.Ledger())
	added := map[int64]bool{}
	for _, c := range l.Commits {
		for _, r := range c.Ranges {
			if r.Topic == topicB {
				added[c.SnapshotID] = true
			}
		}
	}
	rows := liveRows(t, tbl, iceberg.NewAnd(iceberg.EqualTo(iceberg.Reference(mapping.ColTopic), topicB),
		iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), int32(0))))
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	rewriteWhere(t, tbl, func(f snapshot.DataFile) bool { return added[f.AddedBy] }, true, rows)

	// The compacted file's topic bounds must admit topic A too, or the
	// scenario is not the ambiguous one.
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	ambiguous := false
	for _, f := range must(tbl.Files(t.Context(), 0)) {
		if tbl.IsCompaction(f.AddedBy) && f.MayHoldTopic(topicA) && f.MayHoldTopic(topicB) {
			ambiguous = true
		}
	}
	if !ambiguous {
		t.Skip("the compacted file's topic bounds tell the topics apart: no ambiguous file")
	}
	expectFindings(t, e.audit(tbl, filesDepth))
}
