package audit_test

import (
	"os"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
)

// TestAuditCorruptDataFile: a data file overwritten after it was committed
// (8 bytes: no Parquet file) is a file-content finding of the rows level,
// as a deleted one is a missing-file finding; the audit stopped without a
// verdict or a report ("parquet: file too small"), where the README says
// an altered file is caught by --deep (from a new-user run).
func TestAuditCorruptDataFile(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 2, nil)
	e.Produce(records("orders", 0, 20, "a"))
	e.Produce(records("orders", 1, 20, "b"))
	tbl := e.Table("lake.orders")
	e.sink(tbl, connector.Config{Topic: "orders", StopAtEnd: true})
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil || len(files) == 0 {
		t.Fatalf("files %v, %v", files, err)
	}
	bad := files[0].Path
	if err := os.WriteFile(strings.TrimPrefix(bad, "file://"), []byte("garbage!"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows})
	var found bool
	for _, f := range rep.Findings {
		found = found || f.Kind == audit.KindFileContent && f.File == bad && strings.Contains(f.Detail, "cannot be read as Parquet")
	}
	if rep.Complete() || !found {
		t.Fatalf("audit of a table with an overwritten data file: complete %v, findings %+v; want a file-content finding for %s", rep.Complete(), rep.Findings, bad)
	}
}
