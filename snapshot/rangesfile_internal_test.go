package snapshot

import (
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// The ranges files a table holds in memory are those of its live
// snapshots: an expiry drops the others, so a long-lived sink's cache is
// bounded by its retention, not by the table's history.
func TestRangesFilesCacheHoldsLiveSnapshotsOnly(t *testing.T) {
	tbl, _ := internalTable(t, OpenOptions{Create: true, Properties: map[string]string{PropInlineRangesMax: "0"}})
	for i := range 8 {
		r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: 0}, Interval: mapping.Interval{Low: int64(10 * i), High: int64(10*i + 10)}}
		if _, err := tbl.Commit(t.Context(), Flush{Ranges: []mapping.Range{r}}, CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Ledger(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(tbl.ranges.data); n != 8 {
		t.Fatalf("%d ranges files in memory, want the 8 live snapshots'", n)
	}
	if _, err := tbl.Maintain(t.Context(), MaintainOptions{Expire: true, RetainLast: 3}); err != nil {
		t.Fatal(err)
	}
	if n, live := len(tbl.ranges.data), len(tbl.tbl.Metadata().Snapshots()); n != 3 || live != 3 {
		t.Fatalf("%d ranges files in memory for %d live snapshots, want 3", n, live)
	}
	if l, err := tbl.Ledger(); err != nil || len(l.Commits) != 8 {
		t.Fatalf("ledger after expiry: %d commits, %v", len(l.Commits), err)
	}
}
