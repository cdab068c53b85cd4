package audit_test

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestAcceptKeepsDeleteFilesAccepted (from a review): --accept is
// for "a finding that was reviewed and must stay". Another writer's
// row-level deletes of an event table (rows erased on request, say) are
// one: the files level reports them as one delete-files finding whose
// snapshot is the table's head (audit/files.go deleteFiles). Every later
// sink commit makes a new head, so the reviewed finding no longer matches
// the baseline ("same ... snapshot") and fails the nightly audit again
// after the first commit, though nothing about the deletes changed: the
// same delete file, the same rows hidden.
func TestAcceptKeepsDeleteFilesAccepted(t *testing.T) {
	e := newEnv(t)
	e.Topic("erased", 1, nil)
	e.Produce(records("erased", 0, 20, "a"))
	tbl := e.Table("lake.erased")
	e.sink(tbl, connector.Config{Topic: "erased"})
	// Another writer deletes the row of offset 3 (equality delete on
	// kafka_offset).
	ice := tbl.Iceberg()
	f, ok := ice.Schema().FindFieldByName(mapping.ColOffset)
	if !ok {
		t.Fatal("no offset column")
	}
	sel, err := ice.Schema().Select(true, mapping.ColOffset)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := table.SchemaToArrowSchema(sel, nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.Append(3)
	col := b.NewArray()
	batch := array.NewRecordBatch(sc, []arrow.Array{col}, 1)
	txn := ice.NewTransaction()
	if err := txn.CommitEqualityDeletes(e.Ctx, []int{f.ID}, func(yield func(arrow.RecordBatch, error) bool) { yield(batch, nil) }, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	run := func() *audit.Report {
		rep, err := audit.Run(e.Ctx, e.OpenTable("lake.erased", snapshot.OpenOptions{}), audit.Options{Depth: audit.DepthFiles, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	reviewed := run()
	var base bytes.Buffer
	if err := reviewed.WriteJSON(&base); err != nil {
		t.Fatal(err)
	}
	var kinds []audit.Kind
	for _, fd := range reviewed.Findings {
		kinds = append(kinds, fd.Kind)
	}
	t.Logf("reviewed findings: %v", kinds)
	// Nothing about the deletes changes; the sink commits more records.
	e.Produce(records("erased", 0, 5, "b"))
	e.sink(tbl, connector.Config{Topic: "erased"})
	nightly := run()
	if err := nightly.Accept(base.Bytes(), "reviewed.json"); err != nil {
		t.Fatal(err)
	}
	for _, fd := range nightly.Findings {
		if fd.Kind == audit.KindDeleteFiles {
			t.Errorf("after one more sink commit the reviewed delete-files finding is not accepted (snapshot %d, the new head): %s", fd.SnapshotID, fd.Detail)
		}
	}
}
