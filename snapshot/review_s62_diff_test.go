package snapshot_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"

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
