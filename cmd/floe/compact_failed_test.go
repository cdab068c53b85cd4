package main

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// TestPrintCompactionNotCommitted (from a new-user run): floe maintain
// --compact as a PostgreSQL role without UPDATE on the catalog's tables
// failed at each commit attempt and exited 2, but its report said
// "compaction of pg.live: snapshot 0 replaced 10 files (37366 bytes) with
// 1 (3980 bytes), 70 rows; data files 10 -> 10; committed at attempt 5
// (other commits got in first)": nothing was committed. A compaction that
// committed nothing says so, and names neither a snapshot nor a race.
func TestPrintCompactionNotCommitted(t *testing.T) {
	var b strings.Builder
	printCompaction(&b, []snapshot.CompactResult{
		{Table: "pg.live", FilesBefore: 10, FilesAfter: 10, Groups: 1, Replaced: 10, Added: 1, Rows: 70, BytesBefore: 37366, BytesAfter: 3980, Attempts: 5},
		{Table: "pg.up", FilesBefore: 1, FilesAfter: 1, DroppedDeletes: 2, Attempts: 3},
		{Table: "pg.ok", SnapshotID: 42, FilesBefore: 10, FilesAfter: 1, Groups: 1, Replaced: 10, Added: 1, Rows: 70, BytesBefore: 37366, BytesAfter: 3980, Attempts: 2},
	}, false)
	got := b.String()
	for _, want := range []string{
		"compaction of pg.live: not committed (it would have replaced 10 files (37366 bytes) with 1, 70 rows; 5 attempts): the error below says why\n",
		"compaction of pg.up: not committed (it would have dropped 2 delete files that applied to no row; 3 attempts): the error below says why\n",
		"compaction of pg.ok: snapshot 42 replaced 10 files (37366 bytes) with 1 (3980 bytes), 70 rows; data files 10 -> 1; committed at attempt 2 (other commits got in first)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "snapshot 0") {
		t.Errorf("the report names snapshot 0:\n%s", got)
	}
}
