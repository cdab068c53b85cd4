package snapshot_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewS62DiffUpsertGroupLandedRolledBackRefit (review of the diff
// 13219fd..HEAD): an upsert commit whose 6 small partitions share a file
// group lands unanswered; before the retry reloads, an operator rolls main
// back to just before it (no fence: the ledger ends where the flush
// starts) and another writer gives the table a partition spec. The retry
// cannot write the group again (the encoded ledger names its files): it
// returns ErrSchemaMoved, and must keep the files, which the rolled-back
// snapshot's ledger names in its group. That snapshot must stay readable,
// and its group's files must be the ones it adds; the flush committed
// again lands with a group of its own, and an undo of the rollback reads
// the first commit's rows.
func TestReviewS62DiffUpsertGroupLandedRolledBackRefit(t *testing.T) {
	cat := tempCatalog(t)
	const name = "lake.s62_group_refit"
	op := openTestTable(t, cat, name, snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	bounds := map[int32]mapping.Interval{}
	starts := map[int32]mapping.Interval{}
	var recs []testRec
	for p := range int32(6) {
		starts[p] = mapping.Interval{Low: 0, High: 0}
		bounds[p] = mapping.Interval{Low: 0, High: 2}
		recs = append(recs, testRec{p, 0, fmt.Sprintf("k%d", p), "a", 0}, testRec{p, 1, fmt.Sprintf("k%d", p), "b", 0})
	}
	commitRecs(t, op, starts) // the partitions' starts: no rows
	before := op.Head().SnapshotID
	var landed int64
	hc := rollbackAfterLanding(t, cat, op, before, &landed)
	rollback := hc.afterLanding
	hc.afterLanding = func() {
		rollback()
		// Another engine's spec change (floe refuses one on a table with
		// files).
		other := openTestTable(t, cat, name, snapshot.OpenOptions{})
		txn := other.Iceberg().NewTransaction()
		if err := txn.UpdateSpec(true).AddField(mapping.ColKey, iceberg.IdentityTransform{}, "k").Commit(); err != nil {
			t.Error(err)
			return
		}
		if _, err := txn.Commit(t.Context()); err != nil {
			t.Error(err)
		}
	}
	tbl := openTestTable(t, hc, name, snapshot.OpenOptions{})
	_, err := tbl.Commit(t.Context(), flushOf(t, tbl, bounds, recs...), snapshot.CommitOptions{Writer: "test"})
	if landed == 0 {
		t.Fatal("the commit did not land before the rollback: the test proved nothing")
	}
	if !errors.Is(err, snapshot.ErrSchemaMoved) {
		t.Fatalf("the retry after the rollback under a new spec: %v, want ErrSchemaMoved", err)
	}
	fresh := openTestTable(t, cat, name, snapshot.OpenOptions{})
	var c mapping.Commit
	for cc, err := range fresh.CommitsOf(t.Context(), landed, map[int64]bool{landed: true}) {
		if err != nil {
			t.Fatal(err)
		}
		c = cc
	}
	if len(c.FileGroups) != 1 {
		t.Fatalf("the rolled-back commit records groups %+v, want one", c.FileGroups)
	}
	files, err := fresh.Files(t.Context(), landed)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, df := range files {
		paths = append(paths, df.Path)
		if _, err := os.Stat(strings.TrimPrefix(df.Path, "file://")); err != nil {
			t.Errorf("rolled-back snapshot %d names data file %s, deleted by the retry: %v", landed, df.Path, err)
		}
	}
	if g := slices.Sorted(slices.Values(c.FileGroups[0].Files)); !slices.Equal(g, slices.Sorted(slices.Values(paths))) {
		t.Errorf("the rolled-back commit's group lists %v, its snapshot holds %v", g, paths)
	}
	if n := len(snapshotRows(t, fresh, landed)); n != 6 {
		t.Fatalf("rolled-back snapshot %d reads %d rows, want 6", landed, n)
	}
	// The sink reads the flush again and commits it under the new spec.
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := commitRecs(t, tbl, bounds, recs...)
	if len(res.Commit.FileGroups) != 1 {
		t.Fatalf("the flush committed again records groups %+v, want one", res.Commit.FileGroups)
	}
	if err := fresh.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(snapshotRows(t, fresh, 0)); n != 6 {
		t.Fatalf("main reads %d rows after the commit again, want 6", n)
	}
}

// multiDeadCommit commits, in one flush, a range [0, 2) (then [2, 4) with
// from 2) of partitions 0-4 of topics a and b whose record at the range's
// low offset is a dead letter, into dlq; it returns the positions.
func multiDeadCommit(t *testing.T, tbl, dlq *snapshot.Table, from int64) (snapshot.Result, []string, error) {
	t.Helper()
	sc, err := mapping.DeadLetterArrowSchema(dlq.Iceberg().Schema())
	if err != nil {
		t.Fatal(err)
	}
	f := snapshot.Flush{DeadLetters: map[mapping.TopicPartition][]arrow.RecordBatch{}}
	var positions []string
	for _, topic := range []string{"a", "b"} {
		for p := range int32(5) {
			rb, err := mapping.NewDeadLetterBuilder(memory.DefaultAllocator, sc)
			if err != nil {
				t.Fatal(err)
			}
			r := &kgo.Record{Topic: topic, Partition: p, Offset: from, Timestamp: base, Value: fmt.Appendf(nil, "bad %s/%d/%d", topic, p, from)}
			if err := rb.AppendDeadLetter(r, "not JSON", 0); err != nil {
				t.Fatal(err)
			}
			tp := mapping.TopicPartition{Topic: topic, Partition: p}
			f.Ranges = append(f.Ranges, mapping.Range{TopicPartition: tp, Interval: mapping.Interval{Low: from, High: from + 2}, DeadLetters: 1})
			f.DeadLetters[tp] = []arrow.RecordBatch{rb.NewBatch()}
			rb.Release()
			positions = append(positions, fmt.Sprintf("%s/%d/%d", topic, p, from))
		}
	}
	res, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test", DeadLetters: dlq})
	return res, positions, err
}

// TestReviewS62DiffSharedDeadLetterFilesReconcile (review of the diff
// 13219fd..HEAD): a commit's dead letters of 10 partitions of two topics
// go into one shared file. Its writer dies before adding them (pending):
// reconciling adds them all; a second such commit is rolled back
// (reconciling removes its rows, every partition's), and the rollback
// undone (they come back); the dead-letter table's maintenance keeps
// every file a snapshot names.
func TestReviewS62DiffSharedDeadLetterFilesReconcile(t *testing.T) {
	cat, tbl, dlq := deadLetterTables(t)
	broken, err := snapshot.OpenDeadLetters(t.Context(), failingCommits{cat}, dlq.Identifier(), tbl.Name(), false)
	if err != nil {
		t.Fatal(err)
	}
	first, pos1, err := multiDeadCommit(t, tbl, broken, 0)
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](err); !ok {
		t.Fatalf("err = %v, want a DeadLettersPendingError", err)
	}
	if n := len(first.Commit.DeadLetterFiles); n != 1 {
		t.Fatalf("the commit of 10 partitions' dead letters lists %d files, want 1 shared", n)
	}
	reconcile(t, tbl, dlq)
	wantDeadLetters(t, dlq, pos1...)
	second, pos2, err := multiDeadCommit(t, tbl, dlq, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq, slices.Concat(pos1, pos2)...)
	setMain(t, tbl, first.Commit.SnapshotID)
	reconcile(t, tbl, dlq)
	wantDeadLetters(t, dlq, pos1...)
	if _, err := dlq.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	for _, p := range slices.Concat(first.Commit.DeadLetterFiles, second.Commit.DeadLetterFiles) {
		if _, err := os.Stat(strings.TrimPrefix(p, "file://")); err != nil {
			t.Errorf("dead-letter file %s, named by a snapshot, was deleted: %v", p, err)
		}
	}
	setMain(t, tbl, second.Commit.SnapshotID)
	reconcile(t, tbl, dlq)
	wantDeadLetters(t, dlq, slices.Concat(pos1, pos2)...)
}
