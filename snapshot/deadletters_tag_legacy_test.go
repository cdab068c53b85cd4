package snapshot_test

import (
	"slices"
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestLegacyDeadLettersOfATagCountOnMain (from a review): dead letters
// an older floe wrote (no floe_commit_id) of commits that main was rolled
// back past under a tag. Reconciling keeps them (attributed by position
// to the tag's commits); main's audit must skip them at the rows level as
// it skips the tag's rows with a commit id (it counted them on main,
// outside every range of main's ledger, on a correct table, and nothing
// cleared that while the tag existed).
func TestLegacyDeadLettersOfATagCountOnMain(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	rollBackUnderTag(t, tbl, dlq, "before-rollback")
	withoutCommitIDs(t, dlq, 1) // as an older floe left them
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Logger: floetest.QuietLogger()}); err != nil {
		t.Fatal(err)
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/0/5") // the tag keeps its own
	rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Errorf("main's audit, rolled back under a tag that keeps older floe's dead letters (no commit id): not complete, findings %+v; want complete (the tag's rows are the tag's, as with commit ids)", rep.Findings)
	}
}

// TestLegacyDeadLetterOfATagBesideMainsAgain (from a review): as
// TestDeadLettersOfATagBesideMainsAgain, but the tag's dead letters are an
// older floe's (no commit id) and the tag sorts after main. Main sinks
// offset 3 again (c2'). The tag's legacy row at 3 must stay the tag's c2's
// (a commit without rows that carry an id), not go to main's c2' (the
// first commit in ref name order whose range holds it), which has its own
// row: then c2' seemed to have two rows and c2 none, reconciling added
// c2's files again, and every floe maintain failed with a count mismatch.
// Reconciling and both audits must agree with a correct table.
func TestLegacyDeadLetterOfATagBesideMainsAgain(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	rollBackUnderTag(t, tbl, dlq, "zz-pinned")
	withoutCommitIDs(t, dlq, 1)
	quiet := snapshot.MaintainOptions{Logger: floetest.QuietLogger()}
	if _, err := tbl.Maintain(t.Context(), quiet); err != nil {
		t.Fatal(err)
	}
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	for i := range 2 {
		if _, err := tbl.Maintain(t.Context(), quiet); err != nil {
			t.Errorf("floe maintain %d after main sank offset 3 again beside the tag's legacy dead letter: %v", i+1, err)
		}
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/0/3", "t/0/5") // the tag's legacy c2's beside main's c2'
	for _, ref := range []string{"", "zz-pinned"} {
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
		// floe dead-letters takes the legacy rows as the audit does: the
		// one at 3 is the tag's c2's, not main's c2' (whose range holds
		// it too, which made it main's, listed beside c2''s own row).
		want := map[string][]int64{"": {1, 3}, "zz-pinned": {1, 3, 5}}[ref]
		res, err := lookup.DeadLetters(t.Context(), rt, lookup.DeadLetterQuery{})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, d := range res.DeadLetters {
			got = append(got, d.Offset)
		}
		if !slices.Equal(got, want) || res.Matched != res.Counted || len(res.Notes) != 1 {
			t.Errorf("floe dead-letters of %q: offsets %v, %d matched of %d counted, notes %q; want %v, all counted, and the note of the other ref's row",
				ref, got, res.Matched, res.Counted, res.Notes, want)
		}
	}
}

// TestLegacyDeadLettersOfATagAndMainAtOneOffset: an older floe left both
// the tag's c2's dead letter and main's c2”s at offset 3 without a commit
// id. Attribution by position gives both rows to one commit (main's, a
// branch's before a tag's): it seems doubled and the tag's c2 pending, so
// reconciling replaces the two rows by both commits' files, in one commit,
// and then does nothing; both audits find the table complete.
func TestLegacyDeadLettersOfATagAndMainAtOneOffset(t *testing.T) {
	_, tbl, dlq := deadLetterTables(t)
	rollBackUnderTag(t, tbl, dlq, "before-rollback")
	quiet := snapshot.MaintainOptions{Logger: floetest.QuietLogger()}
	if _, err := tbl.Maintain(t.Context(), quiet); err != nil {
		t.Fatal(err)
	}
	mustDeadCommit(t, tbl, dlq, "t", 0, mapping.Interval{Low: 2, High: 4}, 3)
	withoutCommitIDs(t, dlq, 1)
	res, err := tbl.Maintain(t.Context(), quiet)
	if err != nil {
		t.Fatalf("floe maintain with the tag's and main's legacy dead letters at one offset: %v", err)
	}
	if got := res.DeadLetters; got.RepairedLegacy != 1 || got.Added != 2 {
		t.Errorf("floe maintain reconciled %+v, want 1 repaired (main's c2') and 2 added (its files, the tag's c2's)", got)
	}
	wantDeadLetters(t, dlq, "t/0/1", "t/0/3", "t/0/3", "t/0/5")
	if res := reconcile(t, tbl, dlq); res != (snapshot.Reconciled{}) {
		t.Errorf("a second reconcile did %+v, want nothing", res)
	}
	for _, ref := range []string{"", "before-rollback"} {
		rt := tbl
		if ref != "" {
			if rt, err = snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{Branch: ref, ReadTag: true}); err != nil {
				t.Fatal(err)
			}
		}
		rep, err := audit.Run(t.Context(), rt, audit.Options{Depth: audit.DepthRows})
		if err != nil || !rep.Complete() {
			t.Errorf("audit of %q: %v %+v", ref, err, rep.Findings)
		}
	}
}
