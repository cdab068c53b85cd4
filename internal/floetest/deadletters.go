package floetest

import (
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// CopyDeadLetters replaces the rows of the dead-letter table dlq with
// copies copies of each, keeping their commit ids (mapping.ColCommitID)
// or not (as a floe before that column wrote them): the damage a table
// changed outside floe, or by an older floe, shows.
func CopyDeadLetters(t testing.TB, dlq *snapshot.Table, copies int, keepIDs bool) {
	t.Helper()
	_, it, err := dlq.Iceberg().Scan().ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.RecordBatch
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		if !keepIDs {
			cols := slices.Clone(b.Columns())
			i := b.Schema().FieldIndices(mapping.ColCommitID)[0]
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, arrow.BinaryTypes.String, int(b.NumRows()))
			b = array.NewRecordBatch(b.Schema(), cols, b.NumRows())
		}
		for range copies {
			recs = append(recs, b)
		}
	}
	txn := dlq.Iceberg().NewTransaction()
	if err := txn.OverwriteTable(t.Context(), array.NewTableFromRecords(recs[0].Schema(), recs), 1000, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}
