package audit_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestAuditLostDeleteFileBesideExpiry: a delete file of an upsert table's
// head is really gone (the rows level's missing-file finding names it;
// every later head still references it). While the audit reads the table,
// the sink commits again and its maintenance expires the audited snapshot.
// snapshotExpired lists the head's data files only (Table.Files), never
// its delete files, so the real loss is reported as an expiry.
func TestAuditLostDeleteFileBesideExpiry(t *testing.T) {
	e := newEnv(t)
	tbl := upsertedTopic(t, e, "dellost")
	dels, err := tbl.DeleteFiles(e.Ctx, 0)
	if err != nil || len(dels) == 0 {
		t.Fatalf("delete files: %v %v", dels, err)
	}
	lost := dels[0].Path
	if err := os.Remove(strings.TrimPrefix(lost, "file://")); err != nil {
		t.Fatal(err)
	}
	_, dlq := e.UpsertTable("lake.dellost")
	auditor := e.OpenTable("lake.dellost", snapshot.OpenOptions{})
	prog := &hookProgress{after: func() {
		e.Produce([]*kgo.Record{{Topic: "dellost", Partition: 0, Key: []byte("k1"), Value: []byte("more")}})
		e.sink(tbl, connector.Config{Topic: "dellost", DeadLetters: dlq})
		if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
		now, err := tbl.DeleteFiles(e.Ctx, 0)
		if err != nil || !slices.ContainsFunc(now, func(d snapshot.DeleteFile) bool { return d.Path == lost }) {
			t.Fatalf("the head no longer references %s (%v): not the case under test", lost, err)
		}
	}}
	rep, err := audit.Run(e.Ctx, auditor, audit.Options{Depth: audit.DepthRows, Concurrency: 1,
		Progress: func(string, int64) audit.Progress { return prog }})
	if _, ok := errors.AsType[*audit.AuditedSnapshotExpiredError](err); ok {
		t.Fatalf("audit of an upsert table whose delete file %s is really gone (the current head still references it): %v; want the missing-file finding", lost, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Findings, func(fd audit.Finding) bool { return fd.Kind == audit.KindMissingFile && fd.File == lost }) {
		t.Fatalf("findings %+v; want missing-file of %s", rep.Findings, lost)
	}
}

// TestAuditMissingDeadLetterTableBesideExpiry: the dead-letter table the
// ledger names is gone (the ledger level's missing-file finding, which
// names no file). While the audit reads the table, a compaction and an
// expiry remove the audited snapshot. The loss was reported as an expiry
// ("they are not lost rows; run the audit again"): the expiry still is one
// (the rows level read files it deleted), and the ledger level's finding
// is named with it (from a review).
func TestAuditMissingDeadLetterTableBesideExpiry(t *testing.T) {
	e := newEnv(t)
	e.Topic("dlqgone", 1, nil)
	tbl, dlq := e.TypedTable("lake.dlqgone", mapping.Layout{Value: mapping.ValueJSON})
	jsonLog(e, "dlqgone", `{"id":1}`, ``, `{"id":2}`, `{"id":"x"}`, `{"id":3}`, `{"id":4}`)
	e.sink(tbl, connector.Config{Topic: "dlqgone", DeadLetters: dlq, FlushRecords: 2})
	if err := tbl.Catalog().DropTable(e.Ctx, dlq.Identifier()); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	auditor := e.OpenTable("lake.dlqgone", snapshot.OpenOptions{})
	prog := &hookProgress{after: func() {
		compact(t, tbl)
		if _, err := tbl.Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quietLogger()}); err != nil {
			t.Fatal(err)
		}
	}}
	rep, err := audit.Run(e.Ctx, auditor, audit.Options{Depth: audit.DepthRows, Concurrency: 1,
		Progress: func(string, int64) audit.Progress { return prog }})
	if e, ok := errors.AsType[*audit.AuditedSnapshotExpiredError](err); ok {
		if len(e.Ledger) == 0 || e.Ledger[0].Kind != audit.KindMissingFile || !strings.Contains(err.Error(), "its ledger level found") {
			t.Fatalf("audit of a table whose dead-letter table is gone, its snapshot expired under it: %v; want the dead-letter table's missing-file named", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if !hasKind(rep, audit.KindMissingFile) {
		t.Fatalf("findings %+v; want missing-file of the dead-letter table", rep.Findings)
	}
}
