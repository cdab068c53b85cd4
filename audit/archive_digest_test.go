package audit_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestAuditArchivedLossEdited: a loss to retention the ledger recorded is
// in the ledger archive once its snapshot expired. A segment edited in the
// storage to hide it, keeping its byte length (the range before the loss
// widened over it, the lost item blanked to JSON whitespace), was read as
// the ledger, and every level of the audit called the table complete. The
// table records the segment's digests: every level fails naming the
// segment and its SHA-256, and so does a lookup that needs the entry.
func TestAuditArchivedLossEdited(t *testing.T) {
	e := newEnv(t)
	const topic = "hidden"
	e.Topic(topic, 1, nil)
	tbl := e.Table("lake.hidden")
	e.Produce(records(topic, 0, 100, "a"))
	e.sink(tbl, connector.Config{Topic: topic})
	e.Produce(records(topic, 0, 50, "b"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 150); err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 0, 10, "c"))
	e.sink(tbl, connector.Config{Topic: topic, OnDataLoss: connector.LossRecord})
	e.Produce(records(topic, 0, 10, "d"))
	e.sink(tbl, connector.Config{Topic: topic})
	if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	expectFindings(t, e.audit(tbl, ledgerOnly), "ledger lost hidden/0 [100, 150)")

	loc := strings.TrimPrefix(tbl.Iceberg().Location(), "file://")
	var segs []string
	filepath.Walk(filepath.Join(loc, "metadata", "floe-ledger"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			segs = append(segs, p)
		}
		return nil
	})
	edited := ""
	for _, p := range segs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		lost := `,"floe.lost.hidden":"0:100-150"`
		if strings.Contains(s, lost) && strings.Contains(s, `"0:0-100:100"`) {
			s = strings.Replace(s, lost, strings.Repeat(" ", len(lost)), 1)
			s = strings.Replace(s, `"0:0-100:100"`, `"0:0-150:100"`, 1)
			if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
			edited = p
		}
	}
	if edited == "" {
		t.Fatalf("no segment among %q holds the entries to edit", segs)
	}
	fresh := e.OpenTable("lake.hidden", snapshot.OpenOptions{})
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth, contentDepth(e)} {
		rep, err := audit.Run(e.Ctx, fresh, opts)
		var ae *snapshot.ArchiveError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), filepath.Base(edited)) || !strings.Contains(err.Error(), "SHA-256") {
			t.Errorf("audit (depth %v, content %v) of a table whose archive was edited: %v, findings %v; want an *ArchiveError naming %s and its SHA-256", opts.Depth, opts.VerifyContent, err, rep.Findings, filepath.Base(edited))
		}
	}
	if _, err := lookup.Where(e.Ctx, fresh, nil, mapping.TopicPartition{Topic: topic, Partition: 0}, 120); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("where offset 120 in the edited segment: %v, want the SHA-256 mismatch", err)
	}
}
