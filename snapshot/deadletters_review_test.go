package snapshot_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Findings of a review of the dead-letter redesign (issue 19, items 1-7):
// each test fails on the code it was written against.

// beforeDataCommit is a catalog that runs hook once, just before the
// first commit that adds a snapshot is sent: it makes another writer's
// work land at that moment, as a race would. Nothing is faked: every
// commit reaches the real catalog.
type beforeDataCommit struct {
	icecat.Catalog
	hook func()
	once *sync.Once
}

func (c beforeDataCommit) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	return loadThrough(ctx, c.Catalog, c, ident)
}

// loadThrough loads table ident from inner bound to outer, a catalog
// wrapping inner: the table's commits go through outer.
func loadThrough(ctx context.Context, inner, outer icecat.Catalog, ident table.Identifier) (*table.Table, error) {
	tbl, err := inner.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(ident, tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, outer), nil
}

func (c beforeDataCommit) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, upd []table.Update) (table.Metadata, string, error) {
	if slices.ContainsFunc(upd, func(u table.Update) bool { return u.Action() == table.UpdateAddSnapshot }) {
		c.once.Do(c.hook)
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, upd)
}

// TestDeadLetterTablesRecordedByConcurrentWriters: two sinks on one table
// with their own dead-letter tables (--dlq-table) start together; each
// records its dead-letter table in floe.dead-letter-tables before its
// first commit, the second one between the first one's record and its
// data commit (both at the same head). After a rollback past both
// commits, floe maintain must remove both commits' dead letters, and the
// audit must not say complete while one is left.
func TestDeadLetterTablesRecordedByConcurrentWriters(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{Create: true})
	c0 := commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 1}}, testRec{offset: 0, value: "ok"})
	open := func(name string) *snapshot.Table {
		t.Helper()
		dlq, err := snapshot.OpenDeadLetters(t.Context(), cat, table.Identifier{"lake", name}, tbl.Name(), true)
		if err != nil {
			t.Fatal(err)
		}
		return dlq
	}
	dlqA, dlqB := open("errors_a"), open("errors_b")
	sinkB := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{}) // started with sink A
	hook := beforeDataCommit{Catalog: cat, once: &sync.Once{}, hook: func() {
		mustDeadCommit(t, sinkB, dlqB, "t", 1, mapping.Interval{Low: 0, High: 2}, 1)
	}}
	sinkA := openTestTable(t, hook, "lake.orders", snapshot.OpenOptions{})
	mustDeadCommit(t, sinkA, dlqA, "t", 0, mapping.Interval{Low: 1, High: 3}, 2)
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	recorded := tbl.Iceberg().Properties()[snapshot.PropDeadLetterTablePrefix+"lake.errors_a"]
	setMain(t, tbl, c0.Commit.SnapshotID)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	left := map[string][]string{}
	for _, d := range []*snapshot.Table{dlqA, dlqB} {
		if got := deadLetters(t, d); len(got) > 0 {
			left[d.Name()] = got
		}
	}
	if len(left) > 0 {
		t.Errorf("after a rollback past both commits and floe maintain, dead letters of rolled-back commits are left: %v (audit complete: %v; %s=%q)",
			left, rep.Complete(), snapshot.PropDeadLetterTablePrefix+"lake.errors_a", recorded)
	}
}

// TestAuditDeadLettersCommittedAfterTheAuditLoadedTheTable: floe audit
// audits the table as it loaded it; a sink that commits a flush with dead
// letters and adds them to the dead-letter table in between is no stray
// dead letter: the audit of a correct table must say complete.
func TestAuditDeadLettersCommittedAfterTheAuditLoadedTheTable(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	auditView := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{})
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3) // the live sink
	rep, err := audit.Run(t.Context(), auditView, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Errorf("the audit of a correct table, loaded before a sink's next commit, is not complete: %+v", rep.Findings)
	}
}

// legacyDeadLetterSchema is the schema of a dead-letter table that a
// floe before mapping.ColCommitID created.
func legacyDeadLetterSchema() *iceberg.Schema {
	fields := slices.DeleteFunc(mapping.DeadLetterSchema().Fields(), func(f iceberg.NestedField) bool { return f.Name == mapping.ColCommitID })
	return iceberg.NewSchema(0, fields...)
}

// TestAuditWritesNothingToALegacyDeadLetterTable: floe audit writes
// nothing (docs/audit.md); auditing a table whose dead-letter table an
// older floe created (no floe_commit_id column) must leave that table as
// it was.
func TestAuditWritesNothingToALegacyDeadLetterTable(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{Create: true})
	commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 1}}, testRec{offset: 0, value: "ok"})
	ident := snapshot.DeadLetterName(tbl.Identifier())
	if _, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{
		Create: true, Layout: mapping.DeadLetterLayout, Schema: legacyDeadLetterSchema(),
		Properties: map[string]string{snapshot.PropDeadLettersOf: tbl.Name()},
	}); err != nil {
		t.Fatal(err)
	}
	before, err := cat.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows}); err != nil {
		t.Fatal(err)
	}
	after, err := cat.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	if after.MetadataLocation() != before.MetadataLocation() {
		_, added := after.Schema().FindFieldByName(mapping.ColCommitID)
		t.Errorf("floe audit changed dead-letter table %s (metadata %s -> %s; %s column added: %v)",
			strings.Join(ident, "."), before.MetadataLocation(), after.MetadataLocation(), mapping.ColCommitID, added)
	}
}

// withoutCommitIDs replaces the rows of dlq with copies copies of each,
// without a commit id: as a floe before mapping.ColCommitID wrote them.
func withoutCommitIDs(t *testing.T, dlq *snapshot.Table, copies int) {
	t.Helper()
	floetest.CopyDeadLetters(t, dlq, copies, false)
}

// TestDeadLettersLegacyDoubledRowsConverge: an older floe doubled dead
// letters after a rollback (issue 19 item 5): the dead-letter table holds
// a commit's dead letter twice, both rows without a commit id. After the
// upgrade, floe maintain (and every sink session, which reconciles first)
// must converge to one copy, not refuse to run.
func TestDeadLettersLegacyDoubledRowsConverge(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	withoutCommitIDs(t, dlq, 2) // as the older floe left them
	wantDeadLetters(t, dlq, "t/0/1", "t/0/1")
	_, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()})
	if _, ok := errors.AsType[*snapshot.DeadLetterCountError](err); ok {
		t.Fatalf("floe maintain of a table an older floe doubled a dead letter of: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq, "t/0/1")
	if res := reconcile(t, tbl, dlq); res != (snapshot.Reconciled{}) {
		t.Errorf("a second reconcile after the repair did %+v, want nothing", res)
	}
	rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Errorf("audit after the repair: %+v", rep.Findings)
	}
}

// TestMaintainPastDeadLetterCountMismatch: a commit's dead letter is in
// its dead-letter table twice, both rows with its id (changed outside
// floe: nothing tells which copy to keep). floe maintain --retain-last 1
// still expires the data table's and the dead-letter table's snapshots
// (a sink's own maintenance keeps its metadata bounded), and then fails
// with the mismatch.
func TestMaintainPastDeadLetterCountMismatch(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	for i := range int64(3) {
		mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2 * i, High: 2*i + 2}, 2*i+1)
	}
	floetest.CopyDeadLetters(t, dlq, 2, true)
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()})
	if _, ok := errors.AsType[*snapshot.DeadLetterCountError](err); !ok {
		t.Errorf("floe maintain: %v, want a DeadLetterCountError", err)
	}
	if len(res.Expired) == 0 || res.DeadLetterTables[dlq.Name()] == nil || len(res.DeadLetterTables[dlq.Name()].Expired) == 0 {
		t.Errorf("floe maintain --retain-last 1 expired %d snapshots of %s and %+v of its dead-letter table, want some of each",
			len(res.Expired), tbl.Name(), res.DeadLetterTables)
	}
}

// TestDeadLettersLegacyFilesWithoutTheColumn: a dead-letter table an
// older floe created and filled: its files lack the floe_commit_id column
// altogether (not nulls in it). After the upgrade (the column added on
// open) its rows are attributed by position to their commit, compacting
// it keeps them, and a rollback past that commit removes them.
func TestDeadLettersLegacyFilesWithoutTheColumn(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{Create: true})
	c0 := commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 1}}, testRec{offset: 0, value: "ok"})
	ident := snapshot.DeadLetterName(tbl.Identifier())
	old, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{
		Create: true, Layout: mapping.DeadLetterLayout, Schema: legacyDeadLetterSchema(),
		Properties: map[string]string{snapshot.PropDeadLettersOf: tbl.Name()},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The older floe's dead letters of t/0 at 2 and 4, in two files
	// without the column.
	sc, err := mapping.DeadLetterArrowSchema(old.Iceberg().Schema())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []int64{2, 4} {
		rb, err := mapping.NewDeadLetterBuilder(memory.DefaultAllocator, sc)
		if err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: "t", Partition: 0, Offset: o, Timestamp: base, Value: []byte("bad")}
		if err := rb.AppendDeadLetter(r, "not JSON", 0); err != nil {
			t.Fatal(err)
		}
		b := rb.NewBatch()
		rb.Release()
		txn := old.Iceberg().NewTransaction()
		if err := txn.AppendTable(t.Context(), array.NewTableFromRecords(b.Schema(), []arrow.RecordBatch{b}), 1000, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := old.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// The commits that account for them, as the older floe made them:
	// upgraded, floe writes its own copy, which goes, leaving the older
	// rows as the only ones.
	dlq, err := snapshot.OpenDeadLetters(t.Context(), cat, ident, tbl.Name(), true) // as an upgraded sink opens it
	if err != nil {
		t.Fatal(err)
	}
	c1 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 1, High: 3}, 2)
	c2 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 3, High: 5}, 4)
	txn := dlq.Iceberg().NewTransaction()
	if err := txn.Delete(t.Context(), iceberg.NotNull(iceberg.Reference(mapping.ColCommitID)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq, "t/0/2", "t/0/4")
	if res := reconcile(t, tbl, dlq); res != (snapshot.Reconciled{}) {
		t.Errorf("reconcile of an older floe's rows that their commits' ranges hold did %+v, want nothing", res)
	}
	if res, err := dlq.Compact(t.Context(), snapshot.CompactOptions{Logger: floetest.QuietLogger()}); err != nil || res.FilesAfter != 1 {
		t.Fatalf("compacting %s: %+v, %v", dlq.Name(), res, err)
	}
	if res := reconcile(t, tbl, dlq); res != (snapshot.Reconciled{}) {
		t.Errorf("reconcile after compacting the older rows did %+v, want nothing", res)
	}
	wantDeadLetters(t, dlq, "t/0/2", "t/0/4")
	setMain(t, tbl, c1.Commit.SnapshotID)
	if res := reconcile(t, tbl, dlq); res.RemovedLegacy != 1 {
		t.Errorf("reconcile after a rollback past c2: %+v, want its older row removed", res)
	}
	wantDeadLetters(t, dlq, "t/0/2")
	setMain(t, tbl, c2.Commit.SnapshotID) // the rollback undone
	reconcile(t, tbl, dlq)
	wantDeadLetters(t, dlq, "t/0/2", "t/0/4")
	setMain(t, tbl, c0.Commit.SnapshotID)
	reconcile(t, tbl, dlq)
	wantDeadLetters(t, dlq)
}

// replayDeadLetter replays, onto a new branch rebuild of tbl, a commit of
// t/0 [0,2) whose offset 1 is a dead letter, into the branch's dead-letter
// table, and returns the branch and that table.
func replayDeadLetter(t *testing.T, cat icecat.Catalog, tbl *snapshot.Table) (branch, bdlq *snapshot.Table) {
	t.Helper()
	if err := tbl.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatal(err)
	}
	branch = openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{Branch: "rebuild"})
	bdlq, err := snapshot.OpenDeadLetters(t.Context(), cat, snapshot.BranchDeadLetterName(tbl.Identifier(), "rebuild"), tbl.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	mustDeadCommit(t, branch, bdlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	return branch, bdlq
}

// TestDeadLettersPublishUndone: a replay onto branch rebuild is published
// over main, floe maintain converges both dead-letter tables, then the
// dead-letter tables' snapshots are expired and their orphans removed,
// the publish is undone (main set back to its head before it) and floe
// maintain runs again: main's dead letters are back, each once, and the
// audit of main is complete; publishing again brings the replay's back.
func TestDeadLettersPublishUndone(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	c1 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	branch, bdlq := replayDeadLetter(t, cat, tbl)
	_, to, err := branch.Publish(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	maintain := func() {
		t.Helper()
		if err := tbl.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(when string) {
		t.Helper()
		rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Complete() {
			t.Errorf("audit %s: %+v", when, rep.Findings)
		}
	}
	maintain()
	wantDeadLetters(t, dlq)
	wantDeadLetters(t, bdlq, "t/0/1")
	complete("after the publish")
	// The dead-letter tables' own maintenance (a cron over the namespace)
	// expires their snapshots and removes their orphans meanwhile.
	time.Sleep(20 * time.Millisecond)
	for _, d := range []*snapshot.Table{dlq, bdlq} {
		if _, err := d.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, RemoveOrphans: true,
			OrphanMinAge: 10 * time.Millisecond, Logger: floetest.QuietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	setMain(t, tbl, c1.Commit.SnapshotID)
	maintain()
	wantDeadLetters(t, dlq, "t/0/1")
	complete("after the publish was undone")
	setMain(t, tbl, to)
	maintain()
	wantDeadLetters(t, dlq)
	wantDeadLetters(t, bdlq, "t/0/1")
	complete("after publishing again")
}
