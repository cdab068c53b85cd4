package audit_test

import (
	"errors"
	"os"
	"slices"
	"strings"
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

// TestAuditRealLossBesideExpiry: a data file of the head is
// really gone from the storage (the head, and every later snapshot, still
// references it). While the audit reads the table, the sink commits again
// and its maintenance (RetainLast 1) expires the audited snapshot. No
// compaction replaced anything: the missing file is a real loss and is
// still referenced by the table's current head. checkSnapshotLive only
// asks whether the audited snapshot is gone, not whether the missing files
// are ones the expiry deleted, so the audit answers
// AuditedSnapshotExpiredError ("they are not lost rows; run the audit
// again") instead of the missing-file finding — and on a busy table with a
// short retention every rerun answers the same.
func TestAuditRealLossBesideExpiry(t *testing.T) {
	e := newEnv(t)
	tbl := sunkTable(t, e, "reallost")
	f := fileOf(t, tbl, 1, 0)
	if err := os.Remove(strings.TrimPrefix(f.Path, "file://")); err != nil {
		t.Fatal(err)
	}
	auditor := e.OpenTable("lake.reallost", snapshot.OpenOptions{})
	prog := &hookProgress{after: func() {
		e.Produce(records("reallost", 0, 5, "more"))
		e.sink(tbl, connector.Config{Topic: "reallost"})
		if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}}
	rep, err := audit.Run(e.Ctx, auditor, audit.Options{Depth: audit.DepthRows, Concurrency: 1,
		Progress: func(string, int64) audit.Progress { return prog }})
	if _, ok := errors.AsType[*audit.AuditedSnapshotExpiredError](err); ok {
		t.Fatalf("audit of a table whose head file %s is really gone (the current head still references it): %v; want the missing-file finding", f.Path, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Findings, func(fd audit.Finding) bool { return fd.Kind == audit.KindMissingFile && fd.File == f.Path }) {
		t.Fatalf("findings %+v; want missing-file of %s", rep.Findings, f.Path)
	}
}

// TestContentAuditBesideCompactionAndExpiry: the case of
// TestAuditBesideCompactionAndExpiry at the default depth (files) with
// --verify-content --brokers, the documented content audit ("floe audit
// --verify-content"). The rows of the files the expiry deleted under the
// audit are read by the content level only; checkSnapshotLive counts
// missing-file findings alone, so what the content level makes of the
// vanished files decides the answer.
func TestContentAuditBesideCompactionAndExpiry(t *testing.T) {
	e := newEnv(t)
	e.Topic("busyc", 2, nil)
	e.Produce(append(records("busyc", 0, 40, "a"), records("busyc", 1, 40, "b")...))
	tbl := e.Table("lake.busyc")
	e.sink(tbl, connector.Config{Topic: "busyc", FlushRecords: 10})
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	auditor := e.OpenTable("lake.busyc", snapshot.OpenOptions{})
	maintain := func() {
		compact(t, tbl)
		if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	var fired bool
	rep, err := audit.Run(e.Ctx, auditor, audit.Options{Depth: audit.DepthFiles, Broker: e.Broker(), VerifyContent: true, Concurrency: 1,
		Progress: func(what string, _ int64) audit.Progress {
			if strings.HasPrefix(what, "content") && !fired {
				fired = true
				return &hookProgress{after: maintain}
			}
			return &hookProgress{}
		}})
	if !fired {
		t.Fatal("no content progress")
	}
	if _, ok := errors.AsType[*audit.AuditedSnapshotExpiredError](err); ok {
		return
	}
	if err != nil {
		t.Fatalf("content audit whose snapshot was expired under it: %v; want an *AuditedSnapshotExpiredError", err)
	}
	if len(rep.Findings) > 0 {
		for _, f := range rep.Findings {
			t.Errorf("finding on a table that lost nothing: %s %s %s", f.Level, f.Kind, f.Detail)
		}
	}
}
