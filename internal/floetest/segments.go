package floetest

import (
	"os"
	"strings"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// RemoveArchiveSegments deletes the files of the ledger archive segments
// the table (of a file warehouse) names, leaving their indexes, and fails
// the test when it names none: a reader that still works read no archived
// range. It returns how many it deleted.
func RemoveArchiveSegments(t testing.TB, tbl *snapshot.Table) int {
	t.Helper()
	var segs int
	for k, v := range tbl.Iceberg().Properties() {
		if strings.HasPrefix(k, snapshot.PropLedgerSegmentPrefix) {
			if err := os.Remove(strings.TrimPrefix(v, "file://")); err != nil {
				t.Fatal(err)
			}
			segs++
		}
	}
	if segs == 0 {
		t.Fatal("the table names no ledger archive segment")
	}
	return segs
}
