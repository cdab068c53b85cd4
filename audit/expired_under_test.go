package audit_test

import (
	"errors"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// TestAuditBesideCompactionAndExpiry: an audit reads the table
// version it loaded (Run: "as last loaded"); a long --deep audit meets
// the maintenance of a live table: a scheduled compaction replaces the
// files of the audited head, and an expiry (floe maintain on a schedule,
// or the sink's own past its 100-snapshot cap) then removes that head and
// deletes the replaced files. The audit reports the rows of those files as
// lost (missing-file, "its rows are lost"), though the table still holds
// every one of them: a wrong answer, where it could reload, or say the
// snapshot it audited expired.
func TestAuditBesideCompactionAndExpiry(t *testing.T) {
	e := newEnv(t)
	e.Topic("busy", 2, nil)
	e.Produce(append(records("busy", 0, 40, "a"), records("busy", 1, 40, "b")...))
	tbl := e.Table("lake.busy")
	e.sink(tbl, connector.Config{Topic: "busy", FlushRecords: 10})
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	// The auditor has read the manifests and the first file of the
	// rows level when the maintenance runs.
	auditor := e.OpenTable("lake.busy", snapshot.OpenOptions{})
	maintain := func() {
		compact(t, tbl)
		if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	prog := &hookProgress{after: maintain}
	rep, err := audit.Run(e.Ctx, auditor, audit.Options{Depth: audit.DepthRows, Concurrency: 1,
		Progress: func(string, int64) audit.Progress { return prog }})
	if _, ok := errors.AsType[*audit.AuditedSnapshotExpiredError](err); !ok {
		t.Errorf("audit whose snapshot was expired under it: %v, want an *AuditedSnapshotExpiredError", err)
		if rep != nil {
			for _, f := range rep.Findings {
				t.Errorf("finding on a table that lost nothing: %s %s %s", f.Level, f.Kind, f.Detail)
			}
		}
	}
	if fresh := e.audit(tbl, audit.Options{Depth: audit.DepthRows}); len(fresh.Findings) != 0 {
		t.Fatalf("a fresh audit has findings too: %v", findings(fresh))
	}
}

// hookProgress runs after once, at the first progress the rows level
// reports (a file read).
type hookProgress struct{ after func() }

func (p *hookProgress) Add(int64) {
	if f := p.after; f != nil {
		p.after = nil
		f()
	}
}
func (p *hookProgress) Finish() {}
