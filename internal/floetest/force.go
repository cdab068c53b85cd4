package floetest

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// ForceCommit writes a floe commit the way floe never would: its ranges
// need not start where the ledger ends. It injects gaps and overlaps for
// the audit's tests through iceberg-go directly, since Table.Commit refuses
// them. rows, when not nil, is written as one data file and released.
func ForceCommit(t testing.TB, tbl *snapshot.Table, ranges []mapping.Range, rows arrow.RecordBatch) {
	t.Helper()
	c := mapping.Commit{ID: uuid.NewString(), Writer: "fault-injection", Ranges: ranges}
	props, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	ice := tbl.Iceberg()
	txn := ice.NewTransaction()
	if rows == nil || rows.NumRows() == 0 {
		if rows != nil {
			rows.Release()
		}
		err = txn.AddFiles(t.Context(), nil, props, false)
	} else {
		one := func(yield func(arrow.RecordBatch, error) bool) { yield(rows, nil) }
		var files []iceberg.DataFile
		for df, err := range table.WriteRecords(t.Context(), ice, tbl.ArrowSchema(), one) {
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, df)
		}
		err = txn.AddDataFiles(t.Context(), files, props)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
}
