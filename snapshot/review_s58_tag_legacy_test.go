package snapshot_test

import (
	"testing"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestLegacyDeadLettersOfATagCountOnMain (review s58): dead letters an
// older floe wrote (no floe_commit_id) of commits that main was rolled
// back past under a tag. Since tags' ledgers count, reconciling keeps
// them (legacyOf attributes them by position to the tag's commits), but
// the audit's rows level skips only rows whose commit id it can read: it
// counts the tag's legacy rows on main, outside every range of main's
// ledger. Before tags counted, reconciling removed them and main's audit
// was complete; now main's audit of a correct table fails and nothing
// (floe maintain, a sink session) clears it while the tag exists.
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

// TestLegacyDeadLetterOfATagBesideMainsAgain (review s58): as
// TestDeadLettersOfATagBesideMainsAgain, but the tag's dead letters are an
// older floe's (no commit id) and the tag sorts after main. Main sinks
// offset 3 again (c2'); reconciling attributes the tag's legacy row at 3
// by position to the first commit of any ref whose range holds it, now
// main's c2', whose own row is there too: c2' seems to have two rows and
// the tag's c2 none. Reconciling and both audits must still agree with a
// correct table.
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
	t.Logf("dead letters: %v", deadLetters(t, dlq))
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
	}
}
