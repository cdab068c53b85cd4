package audit

import (
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// TestPartitionTableRowsNote: the text report of an upsert table with dead
// letters said both "ROWS counts rows of the table" and "ROWS counts the
// records folded" (from a new-user run); it says one thing per table,
// wrapped to the report's width.
func TestPartitionTableRowsNote(t *testing.T) {
	p := PartitionReport{TopicPartition: mapping.TopicPartition{Topic: "t"}, InLedger: true, Records: 4, DeadLetters: 2}
	for _, c := range []struct {
		r    Report
		want string
	}{
		{Report{Partitions: []PartitionReport{p}, UpsertKey: "kafka_key"}, "(UPSERTS, DELETES and SKIPPED count the ledger's records by what they did to their keys, the table keeping one row per key; 2 more records went to the dead-letter table"},
		{Report{Partitions: []PartitionReport{p}, Fold: mapping.FoldLatest}, "(ROWS counts the records folded, the table keeping each key's latest; 2 more records went to the dead-letter table"},
		{Report{Partitions: []PartitionReport{p}}, "(ROWS counts rows of the table; 2 more records"},
	} {
		var b strings.Builder
		c.r.partitionTable(&b)
		// The note is wrapped to the report's width.
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), c.want) || strings.Count(b.String(), "(ROWS counts")+strings.Count(b.String(), "(UPSERTS, DELETES") != 1 {
			t.Errorf("upsert key %q, fold %q:\n%s\nwant one note: %s", c.r.UpsertKey, c.r.Fold, b.String(), c.want)
		}
	}
}

// TestPartitionTableUpsertCounts (from a new user's CDC evaluation): the
// text report of an upsert table showed ROWS 14 for a table of 9 rows: it
// counts the records the ledger upserted, which the HTML report calls
// upserts, beside deletes and skipped. The text report names them so.
func TestPartitionTableUpsertCounts(t *testing.T) {
	p := PartitionReport{TopicPartition: mapping.TopicPartition{Topic: "customers"}, InLedger: true, Next: 19, Ranges: 2, Records: 14, Deletes: 4, Skipped: 1}
	var b strings.Builder
	(&Report{Partitions: []PartitionReport{p}, Mode: mapping.ModeUpsert, UpsertKey: "id"}).partitionTable(&b)
	lines := strings.Split(b.String(), "\n")
	header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
	want := []string{"PARTITION", "FIRST", "NEXT", "RANGES", "UPSERTS", "DELETES", "SKIPPED", "GAPS", "OVLP", "LOST", "LAG", "STATUS"}
	if !slices.Equal(header, want) || !slices.Equal(row, []string{"customers/0", "0", "19", "2", "14", "4", "1", "0", "0", "0", "-", "ok"}) {
		t.Errorf("partition table of an upsert table:\n%s\nwant columns %v, and the ledger's 14 upserts, 4 deletes and 1 skipped", b.String(), want)
	}
}

// TestReadPhrase (from a new-user run): the audit's "3 rows read" of a
// table of 2 rows counted its dead letters as rows; and one dead letter
// was "1 dead letters".
func TestReadPhrase(t *testing.T) {
	for _, c := range []struct {
		rows, dead int64
		want       string
	}{{2, 1, ", 2 rows and 1 dead letter read"}, {1, 0, ", 1 row read"}, {0, 0, ""}} {
		r := Report{RowsRead: c.rows, DeadLettersRead: c.dead}
		if got := r.readPhrase(); got != c.want {
			t.Errorf("%d rows, %d dead letters: %q, want %q", c.rows, c.dead, got, c.want)
		}
	}
	p := PartitionReport{TopicPartition: mapping.TopicPartition{Topic: "t"}, InLedger: true, Records: 4, DeadLetters: 1}
	var b strings.Builder
	(&Report{Partitions: []PartitionReport{p}}).partitionTable(&b)
	if !strings.Contains(b.String(), "1 more record went to the dead-letter table") {
		t.Errorf("partition table:\n%s", b.String())
	}
}
