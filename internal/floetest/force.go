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
// With spans, the commit records the rows' files as one file group holding
// those spans, whatever its ranges are.
func ForceCommit(t testing.TB, tbl *snapshot.Table, ranges []mapping.Range, rows arrow.RecordBatch, spans ...mapping.Span) {
	t.Helper()
	c := mapping.Commit{ID: uuid.NewString(), Writer: "fault-injection", Ranges: ranges}
	ice := tbl.Iceberg()
	txn := ice.NewTransaction()
	var err error
	if rows == nil || rows.NumRows() == 0 {
		if rows != nil {
			rows.Release()
		}
		err = txn.AddFiles(t.Context(), nil, encode(t, c), false)
	} else {
		one := func(yield func(arrow.RecordBatch, error) bool) { yield(rows, nil) }
		var files []iceberg.DataFile
		for df, err := range table.WriteRecords(t.Context(), ice, tbl.ArrowSchema(), one) {
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, df)
		}
		if len(spans) > 0 {
			g := mapping.FileGroup{Spans: spans}
			for _, df := range files {
				g.Files = append(g.Files, df.FilePath())
			}
			c.FileGroups = []mapping.FileGroup{g}
		}
		err = txn.AddDataFiles(t.Context(), files, encode(t, c))
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

// encode is c.Encode, failing t on error.
func encode(t testing.TB, c mapping.Commit) iceberg.Properties {
	t.Helper()
	props, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return props
}
