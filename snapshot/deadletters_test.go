package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecat "github.com/apache/iceberg-go/catalog"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// deadLetterTables opens a raw data table NAME and its dead-letter table
// NAME_dlq in a new catalog.
func deadLetterTables(t testing.TB) (icecat.Catalog, *snapshot.Table, *snapshot.Table) {
	t.Helper()
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.orders", snapshot.OpenOptions{Create: true})
	dlq, err := snapshot.OpenDeadLetters(t.Context(), cat, snapshot.DeadLetterName(tbl.Identifier()), tbl.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	return cat, tbl, dlq
}

// deadCommit commits range iv of topic's partition p in which the records
// at offsets dead are dead letters (and the others produced nothing), with
// their dead letters into dlq.
func deadCommit(t testing.TB, tbl, dlq *snapshot.Table, topic string, p int32, iv mapping.Interval, dead ...int64) (snapshot.Result, error) {
	t.Helper()
	sc, err := mapping.DeadLetterArrowSchema(dlq.Iceberg().Schema())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := mapping.NewDeadLetterBuilder(memory.DefaultAllocator, sc)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Release()
	for _, o := range dead {
		r := &kgo.Record{Topic: topic, Partition: p, Offset: o, Timestamp: base, Value: fmt.Appendf(nil, "bad %s/%d/%d", topic, p, o)}
		if err := rb.AppendDeadLetter(r, "not JSON", 0); err != nil {
			t.Fatal(err)
		}
	}
	tp := mapping.TopicPartition{Topic: topic, Partition: p}
	f := snapshot.Flush{
		Ranges:      []mapping.Range{{TopicPartition: tp, Interval: iv, DeadLetters: int64(len(dead))}},
		DeadLetters: map[mapping.TopicPartition][]arrow.RecordBatch{tp: {rb.NewBatch()}},
	}
	return tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test", DeadLetters: dlq})
}

// mustDeadCommit is deadCommit that must succeed.
func mustDeadCommit(t testing.TB, tbl, dlq *snapshot.Table, topic string, p int32, iv mapping.Interval, dead ...int64) snapshot.Result {
	t.Helper()
	res, err := deadCommit(t, tbl, dlq, topic, p, iv, dead...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// failingCommits is a catalog whose commits all fail: a dead-letter table
// opened through it takes a commit's dead-letter files but never adds
// them, as when the writer dies between its commit and that append.
type failingCommits struct{ icecat.Catalog }

func (c failingCommits) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	return loadThrough(ctx, c.Catalog, c, ident)
}

func (failingCommits) CommitTable(context.Context, table.Identifier, []table.Requirement, []table.Update) (table.Metadata, string, error) {
	return nil, "", errors.New("injected: the catalog is unreachable")
}

// pendingCommit commits like deadCommit, but its dead letters stay
// pending: adding them to dlq fails.
func pendingCommit(t *testing.T, cat icecat.Catalog, tbl, dlq *snapshot.Table, topic string, p int32, iv mapping.Interval, dead ...int64) snapshot.Result {
	t.Helper()
	broken, err := snapshot.OpenDeadLetters(t.Context(), failingCommits{cat}, dlq.Identifier(), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := deadCommit(t, tbl, broken, topic, p, iv, dead...)
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](err); !ok {
		t.Fatalf("err = %v, want a DeadLettersPendingError", err)
	}
	return res
}

// deadLetters lists "topic/partition/offset" of every row of dlq's head,
// sorted (a position twice is listed twice).
func deadLetters(t *testing.T, dlq *snapshot.Table) []string {
	t.Helper()
	if err := dlq.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	var out []string
	cols := []string{mapping.ColTopic, mapping.ColPartition, mapping.ColOffset}
	err := dlq.ScanFiles(t.Context(), 0, snapshot.ScanOptions{Columns: cols}, func(fb snapshot.FileBatch) error {
		if fb.Done {
			return nil
		}
		b := fb.Batch
		col := func(name string) arrow.Array { return b.Column(b.Schema().FieldIndices(name)[0]) }
		topic, part, off := col(mapping.ColTopic), col(mapping.ColPartition), col(mapping.ColOffset)
		for i := range int(b.NumRows()) {
			out = append(out, topic.ValueStr(i)+"/"+part.ValueStr(i)+"/"+off.ValueStr(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// wantDeadLetters fails unless dlq holds one dead letter at each of
// positions ("topic/partition/offset"), and no other.
func wantDeadLetters(t *testing.T, dlq *snapshot.Table, positions ...string) {
	t.Helper()
	slices.Sort(positions)
	if got := deadLetters(t, dlq); !slices.Equal(got, positions) {
		t.Fatalf("%s holds dead letters %v, want %v", dlq.Name(), got, positions)
	}
}

// setMain points main at snapshot id, as an operator's rollback (or its
// undo) does.
func setMain(t testing.TB, tbl *snapshot.Table, id int64) {
	t.Helper()
	upd := []table.Update{table.NewSetSnapshotRefUpdate(table.MainBranch, id, table.BranchRef, -1, -1, -1)}
	if _, _, err := tbl.Catalog().CommitTable(t.Context(), tbl.Identifier(), nil, upd); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func reconcile(t *testing.T, tbl, dlq *snapshot.Table) snapshot.Reconciled {
	t.Helper()
	res, err := tbl.ReconcileDeadLetters(t.Context(), dlq, floetest.QuietLogger())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestDeadLettersOtherTopicDoesNotHidePending (issue 19, item 1): two
// topics share a table and its dead-letter table. Topic b's dead letter
// at partition 0 offset 1 is in; topic a's commit of partition 0 [0,2)
// has its dead letter pending. Reconciling must add it: another topic's
// dead letter at the same partition and offset is not it.
func TestDeadLettersOtherTopicDoesNotHidePending(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "b", 0, mapping.Interval{Low: 0, High: 2}, 1)
	pendingCommit(t, cat, tbl, dlq, "a", 0, mapping.Interval{Low: 0, High: 2}, 1)
	if res := reconcile(t, tbl, dlq); res.Added != 1 {
		t.Errorf("reconcile added the dead letters of %d commits, want 1", res.Added)
	}
	wantDeadLetters(t, dlq, "a/0/1", "b/0/1")
	if res := reconcile(t, tbl, dlq); res != (snapshot.Reconciled{}) {
		t.Errorf("a second reconcile did %+v, want nothing", res)
	}
}

// TestDeadLettersCompactionOverPending (item 2): c1 [0,2) and c3 [4,6)
// have their dead letters in, c2 [2,4) is pending; compacting the
// dead-letter table merges c1's and c3's files into one that spans c2's
// range. Reconciling must still add c2's.
func TestDeadLettersCompactionOverPending(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	pendingCommit(t, cat, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 4, High: 6}, 5)
	if err := dlq.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	res, err := dlq.Compact(t.Context(), snapshot.CompactOptions{Logger: floetest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesAfter != 1 {
		t.Fatalf("compaction left %d files, want 1 (the test needs c1's and c3's merged)", res.FilesAfter)
	}
	reconcile(t, tbl, dlq)
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/0/5")
}

// TestDeadLettersBranchTableKeepsReplay (item 3): the dead letters a
// replay onto a branch wrote into the branch's dead-letter table belong to
// the branch's ledger: maintaining that table (a cron over every table of
// the namespace) must not remove them, published or not.
func TestDeadLettersBranchTableKeepsReplay(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	branch, bdlq := replayDeadLetter(t, cat, tbl)
	if _, err := bdlq.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, bdlq, "t/0/1")
	if _, _, err := branch.Publish(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, d := range []*snapshot.Table{bdlq, dlq} {
		if _, err := d.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
			t.Fatal(err)
		}
	}
	wantDeadLetters(t, bdlq, "t/0/1")
	wantDeadLetters(t, dlq)
}

// TestDeadLettersUndoRollback (item 4, and orphan cleanup): main is rolled
// back past c2, whose dead letter floe maintain then removes (and the
// dead-letter table's maintenance expires and cleans up after); main is
// set back to c2: the next reconcile adds c2's dead letter again, from its
// files, which cleanup kept because a data-table snapshot names them.
func TestDeadLettersUndoRollback(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	c1 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	c2 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	setMain(t, tbl, c1.Commit.SnapshotID)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq, "t/0/1")
	time.Sleep(20 * time.Millisecond)
	if _, err := dlq.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, RemoveOrphans: true, OrphanMinAge: 10 * time.Millisecond, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	setMain(t, tbl, c2.Commit.SnapshotID)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3")
}

// TestDeadLetterCleanupReadsRolledBackLinesDownToMain: a dead-letter
// table's maintenance keeps the files of the commits on the lines
// rollbacks left (keptFiles), reading each line down to main's history
// only: with ten rolled-back commits above main, whose ledger below them
// is archived with a dead letter in every commit, it reads the archive as
// often as without them (it read each line's whole ledger: the archive
// once more per line), and keeps their files.
func TestDeadLetterCleanupReadsRolledBackLinesDownToMain(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	var reads atomic.Int64
	counted, err := snapshot.OpenDeadLetters(t.Context(), archiveReads{cat, &reads}, dlq.Identifier(), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	commit := func() snapshot.Result {
		t.Helper()
		res := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: off, High: off + 2}, off+1)
		off += 2
		return res
	}
	for range 20 {
		commit()
	}
	quiet := floetest.QuietLogger()
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	maintain := func() int64 {
		t.Helper()
		reads.Store(0)
		if _, err := counted.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}); err != nil {
			t.Fatal(err)
		}
		return reads.Load()
	}
	maintain()
	without := maintain()
	if without == 0 {
		t.Fatal("the dead-letter table's maintenance read no archive file: the test proves nothing")
	}
	var tips []snapshot.Result
	for range 10 {
		head := tbl.Head().SnapshotID
		tips = append(tips, commit())
		setMain(t, tbl, head)
		off -= 2
	}
	maintain()
	if with := maintain(); with > without {
		t.Errorf("the dead-letter table's maintenance read the ledger archive %d times with 10 rolled-back commits above main, %d times without", with, without)
	}
	for _, tip := range tips {
		for _, f := range tip.Commit.DeadLetterFiles {
			if _, err := os.Stat(strings.TrimPrefix(f, "file://")); err != nil {
				t.Errorf("dead-letter file of rolled-back snapshot %d: %v", tip.Commit.SnapshotID, err)
			}
		}
	}
}

// archiveReads is a catalog whose tables' storage (a local one) counts
// the opens of ledger archive files.
type archiveReads struct {
	icecat.Catalog
	n *atomic.Int64
}

func (c archiveReads) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(ident, tbl.Metadata(), tbl.MetadataLocation(), func(ctx context.Context) (iceio.IO, error) {
		fsys, err := tbl.FS(ctx)
		if err != nil {
			return nil, err
		}
		return archiveReadsIO{fsys.(iceio.WriteFileIO), c.n}, nil
	}, c), nil
}

type archiveReadsIO struct {
	iceio.WriteFileIO
	n *atomic.Int64
}

func (c archiveReadsIO) Open(name string) (iceio.File, error) {
	if strings.Contains(name, "/floe-ledger/") {
		c.n.Add(1)
	}
	return c.WriteFileIO.Open(name)
}

// rollBackUnderTag commits c1, c2 and c3 of partition 0 ([0,2), [2,4),
// [4,6), a dead letter at 1, 3 and 5), tags c3 as tag and rolls main back
// to c1, as an operator keeping the rollback undoable does; it returns c3.
func rollBackUnderTag(t *testing.T, tbl, dlq *snapshot.Table, tag string) snapshot.Result {
	t.Helper()
	c1 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	c3 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 4, High: 6}, 5)
	pin := []table.Update{table.NewSetSnapshotRefUpdate(tag, c3.Commit.SnapshotID, table.TagRef, -1, -1, -1)}
	if _, _, err := tbl.Catalog().CommitTable(t.Context(), tbl.Identifier(), nil, pin); err != nil {
		t.Fatal(err)
	}
	setMain(t, tbl, c1.Commit.SnapshotID)
	return c3
}

// TestDeadLettersUndoRollbackPinnedByTag: an operator tags main's head
// (c3) and rolls main back to c1; floe maintain keeps c2's and c3's dead
// letters, which the tag's ledger names (the tag is audited and listed
// from them), and main's audit does not count them; expiry drops c2,
// which only the tag's ancestry reaches (its ledger entry is archived).
// The dead-letter table's cleanup must keep c2's dead-letter file: main
// set back to the tag has c2's and c3's dead letters, and the audit finds
// the table complete. (Before tags counted, the rollback removed them and
// the undo added them back.)
func TestDeadLettersUndoRollbackPinnedByTag(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	c3 := rollBackUnderTag(t, tbl, dlq, "before-rollback")
	quiet := floetest.QuietLogger()
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/0/5")
	if rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows}); err != nil || !rep.Complete() {
		t.Fatalf("main's audit while rolled back: %v %+v", err, rep.Findings)
	}
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n != 2 {
		t.Fatalf("after expiry the table has %d snapshots, want 2 (main's c1, the tag's c3)", n)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := dlq.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, RemoveOrphans: true, OrphanMinAge: 10 * time.Millisecond, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	setMain(t, tbl, c3.Commit.SnapshotID)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: quiet}); err != nil {
		t.Fatalf("floe maintain after main was set back to the tag: %v", err)
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/0/5")
	rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Fatalf("audit after the undo: %+v", rep.Findings)
	}
}

// TestDeadLettersOfATagBesideMainsAgain: main rolled back past c2 and c3
// under a tag, and the same offsets sunk again (c2'): the dead-letter
// table holds the tag's dead letters beside main's new one at the same
// offset, each ref's audit counts its own (neither finds a duplicate nor
// a count mismatch), and once the tag is dropped reconciling removes c2's
// and c3's.
func TestDeadLettersOfATagBesideMainsAgain(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	rollBackUnderTag(t, tbl, dlq, "pinned")
	reconcile(t, tbl, dlq)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	if res := reconcile(t, tbl, dlq); res != (snapshot.Reconciled{}) {
		t.Errorf("reconcile with the tag's and main's dead letters did %+v, want nothing", res)
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/0/3", "t/0/5")
	for _, ref := range []string{"", "pinned"} {
		rt := tbl
		if ref != "" {
			var err error
			if rt, err = snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{Branch: ref, ReadTag: true}); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := audit.Run(t.Context(), rt, audit.Options{Depth: audit.DepthRows})
		if err != nil || !rep.Complete() {
			t.Errorf("audit of %q: %v %+v", ref, err, rep.Findings)
		}
	}
	drop := []table.Update{table.NewRemoveSnapshotRefUpdate("pinned")}
	if _, _, err := tbl.Catalog().CommitTable(t.Context(), tbl.Identifier(), nil, drop); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res := reconcile(t, tbl, dlq); res.Removed != 2 {
		t.Errorf("reconcile once the tag was dropped removed the dead letters of %d commits, want 2 (c2's, c3's)", res.Removed)
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3")
}

// TestDeadLettersRollbackAfterExpiry (item 5): the dead-letter table's
// snapshots are expired (but the last), then main is rolled back past c2
// and c3 and the same offsets are committed again: c2's dead letter must
// be removed, not kept beside its new copy.
func TestDeadLettersRollbackAfterExpiry(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	c1 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 4, High: 6}, 5)
	if _, err := dlq.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	setMain(t, tbl, c1.Commit.SnapshotID)
	reconcile(t, tbl, dlq) // as the next sink session does first
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	reconcile(t, tbl, dlq)
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3")
}

// TestDeadLettersRollbackPastEveryCommit (item 6): main is rolled back
// past every commit with dead letters, so its ledger names no dead-letter
// table. The audit must still find the dead letters outside the ledger in
// the table's dead-letter table, and floe maintain must remove them.
func TestDeadLettersRollbackPastEveryCommit(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	c0 := commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 1}}, testRec{offset: 0, value: "ok"})
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 1, High: 3}, 2)
	setMain(t, tbl, c0.Commit.SnapshotID)
	rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete() {
		t.Errorf("the audit says complete; %s holds a dead letter of a rolled-back commit", dlq.Name())
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq)
	if rep, err = audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows}); err != nil || !rep.Complete() {
		t.Fatalf("audit after floe maintain: %v %+v", err, rep.Findings)
	}
}

// TestDeadLetterTableMaintained (item 7): maintaining the data table (the
// sink's own maintenance, floe maintain) maintains its dead-letter table
// too: the dead-letter table's snapshots are expired with the data
// table's, and its snapshots carry no file list.
func TestDeadLetterTableMaintained(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	for i := range int64(30) {
		mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2 * i, High: 2*i + 2}, 2*i+1)
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1, Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	if err := dlq.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(dlq.Iceberg().Metadata().Snapshots()); n > 1 {
		t.Errorf("%s keeps %d snapshots after floe maintain --retain-last 1 of %s", dlq.Name(), n, tbl.Name())
	}
	for _, s := range dlq.Iceberg().Metadata().Snapshots() {
		if s.Summary != nil && s.Summary.Properties[mapping.KeyDeadLetterFiles] != "" {
			t.Errorf("snapshot %d of %s lists its files in its summary", s.SnapshotID, dlq.Name())
			break
		}
	}
	if got := len(deadLetters(t, dlq)); got != 30 {
		t.Errorf("%d dead letters after maintenance, want 30", got)
	}
}

// TestAuditPendingOnlyWhenReconcileAdds (the audit's messages): a commit
// whose dead letters are not in is dead-letters-pending only while
// reconciling would add them; once reconciled the table is complete; a
// pending commit whose files were deleted is a missing file (nothing can
// add them), not pending.
func TestAuditPendingOnlyWhenReconcileAdds(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	mustDeadCommit(t, tbl, dlq, "b", 0, mapping.Interval{Low: 0, High: 2}, 1)
	pendingCommit(t, cat, tbl, dlq, "a", 0, mapping.Interval{Low: 0, High: 2}, 1)
	run := func() *audit.Report {
		t.Helper()
		if err := tbl.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := run(); !hasFinding(rep, audit.KindDeadLettersPending) {
		t.Fatalf("before reconciling: want dead-letters-pending, got %+v", rep.Findings)
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	if rep := run(); !rep.Complete() {
		t.Fatalf("after floe maintain: %+v", rep.Findings)
	}

	c := pendingCommit(t, cat, tbl, dlq, "a", 0, mapping.Interval{Low: 2, High: 4}, 3)
	fsys, err := dlq.Iceberg().FS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Commit.DeadLetterFiles {
		if err := fsys.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	rep := run()
	if hasFinding(rep, audit.KindDeadLettersPending) || !hasFinding(rep, audit.KindMissingFile) {
		t.Fatalf("pending dead letters whose files were deleted: want missing-file and no dead-letters-pending, got %+v", rep.Findings)
	}
}

func hasFinding(rep *audit.Report, k audit.Kind) bool {
	return slices.ContainsFunc(rep.Findings, func(f audit.Finding) bool { return f.Kind == k })
}

// TestDeadLettersLegacyRows: rows of a dead-letter table written before
// floe_commit_id existed (null there) are attributed by position to the
// commit whose range with dead letters holds them, and removed when no
// commit of a ledger does.
func TestDeadLettersLegacyRows(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	c0 := commitRecs(t, tbl, map[int32]mapping.Interval{0: {Low: 0, High: 1}}, testRec{offset: 0, value: "ok"})
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 1, High: 3}, 2)
	withoutCommitIDs(t, dlq, 1) // the same rows, as an older floe wrote them
	if res := reconcile(t, tbl, dlq); res != (snapshot.Reconciled{}) {
		t.Errorf("reconcile of rows without a commit id that their commit's range holds did %+v, want nothing", res)
	}
	wantDeadLetters(t, dlq, "t/0/2")
	setMain(t, tbl, c0.Commit.SnapshotID)
	if res := reconcile(t, tbl, dlq); res.RemovedLegacy != 1 {
		t.Errorf("reconcile after the rollback: %+v, want the row without a commit id removed", res)
	}
	wantDeadLetters(t, dlq)
}

// lostAnswer is a catalog that applies its next commit but reports it
// failed, as when the catalog's answer is lost.
type lostAnswer struct {
	icecat.Catalog
	lost *atomic.Bool
}

func (c lostAnswer) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	return loadThrough(ctx, c.Catalog, c, ident)
}

func (c lostAnswer) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, upds []table.Update) (table.Metadata, string, error) {
	meta, loc, err := c.Catalog.CommitTable(ctx, ident, reqs, upds)
	if err == nil && c.lost.CompareAndSwap(true, false) {
		return nil, "", errors.New("injected: the catalog's answer was lost")
	}
	return meta, loc, err
}

// TestDeadLettersAddUnknownOutcome: adding a commit's dead letters is
// applied but its answer is lost; the retry finds the commit's rows in the
// table and adds nothing more. Then a writer whose handle is stale (another
// writer added dead letters since) loses the race, finds none of its own
// rows, and adds them, once.
func TestDeadLettersAddUnknownOutcome(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	lost := &atomic.Bool{}
	flaky, err := snapshot.OpenDeadLetters(t.Context(), lostAnswer{cat, lost}, dlq.Identifier(), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	lost.Store(true)
	mustDeadCommit(t, tbl, flaky, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	wantDeadLetters(t, dlq, "t/0/1")
	stale, err := snapshot.OpenDeadLetters(t.Context(), cat, dlq.Identifier(), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	mustDeadCommit(t, tbl, stale, "t", 1, mapping.Interval{Low: 0, High: 2}, 1)
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/1/1")
	if res := reconcile(t, tbl, dlq); res != (snapshot.Reconciled{}) {
		t.Errorf("reconcile did %+v, want nothing", res)
	}
}

// TestDeadLettersRollbackOverCompacted: compaction merged c1's and c2's
// dead letters into one file; main is rolled back past c2: reconciling
// rewrites that file without c2's dead letter.
func TestDeadLettersRollbackOverCompacted(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	c1 := mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	if err := dlq.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if res, err := dlq.Compact(t.Context(), snapshot.CompactOptions{Logger: floetest.QuietLogger()}); err != nil || res.FilesAfter != 1 {
		t.Fatalf("compaction: %+v, %v; the test needs one file", res, err)
	}
	setMain(t, tbl, c1.Commit.SnapshotID)
	if res := reconcile(t, tbl, dlq); res.Removed != 1 {
		t.Errorf("reconcile did %+v, want one commit's dead letters removed", res)
	}
	wantDeadLetters(t, dlq, "t/0/1")
}

// liveWriterFirst is a catalog whose commits let a live writer commit
// first (before), as sinks that commit with dead letters more often than
// a reconcile attempt takes do.
type liveWriterFirst struct {
	icecat.Catalog
	before func()
}

func (c liveWriterFirst) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(ident, tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c liveWriterFirst) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, upds []table.Update) (table.Metadata, string, error) {
	c.before()
	return c.Catalog.CommitTable(ctx, ident, reqs, upds)
}

// TestReconcileDeadLettersBesideLiveWriters: floe maintain reconciles a
// dead-letter table while live sinks commit with dead letters; a stopped
// writer left one commit's dead letters pending. Before each of the
// reconcile's first 15 commits a live writer commits a range with a dead
// letter and adds it, so that the dead-letter table's head has moved
// since the reconcile read it (the fault campaign's deadletters scenario:
// three members flushing every 400 ms beside floe maintain, whose
// reconcile lost 10 races in a row and gave up, exit 2, in each of its
// first two runs). A writer adding its own dead letters outlasts 30 lost
// races; reconciling must outlast as many, add the pending dead letters
// and return.
func TestReconcileDeadLettersBesideLiveWriters(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	pendingCommit(t, cat, tbl, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	writer := openTestTable(t, cat, tbl.Name(), snapshot.OpenOptions{})
	want := []string{"t/0/1"}
	var next int64
	live := liveWriterFirst{Catalog: cat, before: func() {
		if next == 2*15 {
			return
		}
		mustDeadCommit(t, writer, dlq, "t", 1, mapping.Interval{Low: next, High: next + 2}, next+1)
		want = append(want, fmt.Sprintf("t/1/%d", next+1))
		next += 2
	}}
	raced, err := snapshot.OpenDeadLetters(t.Context(), live, dlq.Identifier(), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tbl.ReconcileDeadLetters(t.Context(), raced, floetest.QuietLogger())
	if err != nil {
		t.Fatalf("reconcile beside live writers (%d of their commits meanwhile): %v", next/2, err)
	}
	if res.Added != 1 {
		t.Errorf("reconcile did %+v, want the pending commit added", res)
	}
	wantDeadLetters(t, dlq, want...)
}

// TestDeadLettersOfRolledBackUnansweredCommit: a commit with a dead letter
// lands but its answer is lost, and an operator rolls main back past it
// before the retry reloads. The fenced retry keeps the dead-letter file
// the rolled-back commit lists, so undoing the rollback brings its dead
// letter back (it deleted the file, and the undo's reconcile had nothing
// to add: the audit then found the dead letter missing).
func TestDeadLettersOfRolledBackUnansweredCommit(t *testing.T) {
	cat, op, dlq := deadLetterTables(t)
	c0 := mustDeadCommit(t, op, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	mustDeadCommit(t, op, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	var landed int64
	tbl := openTestTable(t, rollbackAfterLanding(t, cat, op, c0.Commit.SnapshotID, &landed), "lake.orders", snapshot.OpenOptions{})
	if _, err := deadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 4, High: 6}, 5); !errors.Is(err, snapshot.ErrFenced) {
		t.Fatalf("err = %v, want fenced: the rollback moved the ledger's end below the flush", err)
	}
	if landed == 0 {
		t.Fatal("the commit did not land before the rollback: the test proved nothing")
	}
	reconcile(t, op, dlq)
	wantDeadLetters(t, dlq, "t/0/1")
	setMain(t, op, landed)
	reconcile(t, op, dlq)
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/0/5")
}

// TestDeadLettersOfFencedCommitRemoved: the dead-letter file a fenced
// commit wrote is deleted with its data files, as nothing will ever list
// it (a shadowed error left every such file to orphan removal).
func TestDeadLettersOfFencedCommitRemoved(t *testing.T) {
	cat, op, dlq := deadLetterTables(t)
	mustDeadCommit(t, op, dlq, "t", 0, mapping.Interval{Low: 0, High: 2}, 1)
	hc := &hookCatalog{Catalog: cat, beforeCommit: func() {
		mustDeadCommit(t, op, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	}}
	zombie := openTestTable(t, hc, "lake.orders", snapshot.OpenOptions{})
	res, err := deadCommit(t, zombie, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	if !errors.Is(err, snapshot.ErrFenced) {
		t.Fatalf("err = %v, want fenced: another writer committed [2, 4) first", err)
	}
	if len(res.Commit.DeadLetterFiles) == 0 {
		t.Fatal("the fenced commit lists no dead-letter file: the test proved nothing")
	}
	for _, f := range res.Commit.DeadLetterFiles {
		if _, err := os.Stat(strings.TrimPrefix(f, "file://")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("dead-letter file %s of the fenced commit is still there (%v)", f, err)
		}
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3")
}
