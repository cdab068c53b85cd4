package audit

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// TestPartitionTableRowsNote: the text report of an upsert table with dead
// letters said both "ROWS counts rows of the table" and "ROWS counts the
// records folded" (from a new-user run); it says one thing per table.
func TestPartitionTableRowsNote(t *testing.T) {
	p := PartitionReport{TopicPartition: mapping.TopicPartition{Topic: "t"}, InLedger: true, Records: 4, DeadLetters: 2}
	for _, c := range []struct {
		r    Report
		want string
	}{
		{Report{Partitions: []PartitionReport{p}, UpsertKey: "kafka_key"}, "(ROWS counts the records folded, the table keeping each key's latest; 2 more records went to the dead-letter table"},
		{Report{Partitions: []PartitionReport{p}}, "(ROWS counts rows of the table; 2 more records"},
	} {
		var b strings.Builder
		c.r.partitionTable(&b)
		if !strings.Contains(b.String(), c.want) || strings.Count(b.String(), "(ROWS counts") != 1 {
			t.Errorf("upsert key %q:\n%s\nwant one note: %s", c.r.UpsertKey, b.String(), c.want)
		}
	}
}
