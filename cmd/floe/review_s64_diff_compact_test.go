package main

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// TestReviewS64DiffCompactPartsAttemptsLine: a compaction committed in
// parts adds up its parts' attempts (CompactResult.Attempts), so four
// parts each committed at their first attempt give Attempts 4. floe
// maintain's line then said "committed at attempt 4 (other commits got
// in first)": no other commit got in, and no part took more than one.
func TestReviewS64DiffCompactPartsAttemptsLine(t *testing.T) {
	r := snapshot.CompactResult{Table: "lake.orders", SnapshotID: 42, Commits: 4, Attempts: 4,
		FilesBefore: 24, FilesAfter: 8, Groups: 4, Replaced: 20, Added: 4, Rows: 100, BytesBefore: 2000, BytesAfter: 1500}
	var b strings.Builder
	printCompaction(&b, []snapshot.CompactResult{r}, false)
	if strings.Contains(b.String(), "other commits got in first") {
		t.Errorf("four parts each committed at their first attempt:\n%s", b.String())
	}
}
