package snapshot_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// TestDropRefOfTruncatedBranch: a branch whose ledger another tool
// truncated (its older snapshots expired with no archive file holding
// their entries) is what floe maintain's *LostEntriesError tells the user
// to drop ("drop the branches and tags that need them"); DropRef must
// drop it, not fail reading the very ledger that is gone (review s60b).
func TestDropRefOfTruncatedBranch(t *testing.T) {
	tbl, _ := maintainTable(t, 1)
	// Two truncated branches: neither's truncated ledger may refuse the
	// other's drop.
	var br *snapshot.Table
	for _, name := range []string{"b", "c"} {
		if err := tbl.CreateEmptyBranch(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		var err error
		if br, err = snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{Branch: name}); err != nil {
			t.Fatal(err)
		}
		commitRanges(t, br, 0, 3)
	}
	// Another tool expires the branch's older snapshots.
	expireAllButLast(t, br, tbl)
	_, merr := tbl.Maintain(t.Context(), snapshot.MaintainOptions{DryRun: true})
	var le *snapshot.LostEntriesError
	t.Logf("maintain: %v (lost entries %v)", merr, errors.As(merr, &le))

	for _, name := range []string{"b", "c"} {
		if _, err := tbl.DropRef(t.Context(), slog.Default(), name, snapshot.DropRefOptions{}); err != nil {
			t.Fatalf("drop of truncated branch %s: %v", name, err)
		}
		if err := tbl.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		if tbl.HasBranch(name) {
			t.Fatalf("branch %s is still there", name)
		}
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatalf("maintain after the drop: %v", err)
	}
}
