package snapshot_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestOpenRefusesMissingBranch: writing a branch that does not exist would
// fork it from main, so Open refuses it.
func TestOpenRefusesMissingBranch(t *testing.T) {
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	ident := []string{"lake", "branches"}
	tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Branch: "rebuild"})
	if err == nil || !strings.Contains(err.Error(), `has no branch "rebuild"`) {
		t.Fatalf("err = %v, want a refusal naming the branch", err)
	}
	if err := tbl.CreateEmptyBranch(t.Context(), "rebuild"); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Branch: "rebuild"}); err != nil {
		t.Fatal(err)
	}
	// A misspelt branch is told from the ones the table has (no floe
	// command lists them; from a new-user run).
	_, err = snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Branch: "rebiuld"})
	if err == nil || !strings.Contains(err.Error(), `has no branch "rebiuld" (its branches: rebuild)`) {
		t.Fatalf("err = %v, want a refusal naming the table's branches", err)
	}
}

// TestLedgerRefusesExpiredHistory: after snapshot expiry the ledger would
// silently lose the expired ranges (and a sink would re-sink them), so
// reading it is an error.
func TestLedgerRefusesExpiredHistory(t *testing.T) {
	dir := t.TempDir()
	cat, err := catalog.Open(t.Context(), catalog.Config{
		Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "wh")})
	if err != nil {
		t.Fatal(err)
	}
	ident := []string{"lake", "expired"}
	tbl, err := snapshot.Open(t.Context(), cat, ident, snapshot.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(3) {
		r := mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: int32(i)}, Interval: mapping.Interval{Low: 0, High: 5}}
		if _, err := tbl.Commit(t.Context(), snapshot.Flush{Ranges: []mapping.Range{r}}, snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	expireAllButLast(t, tbl, tbl)
	_, err = tbl.Ledger()
	if !errors.Is(err, snapshot.ErrTruncatedLedger) {
		t.Fatalf("ledger of an expired history: err %v, want ErrTruncatedLedger", err)
	}
}

// TestCommitRetriesAfterForeignPartitionConflict: a stale writer whose
// flush holds several ranges of one partition (data, a recorded loss, more
// data) loses a race to a writer of another partition; it must retry, not
// consider itself fenced.
func TestCommitRetriesAfterForeignPartitionConflict(t *testing.T) {
	dir := t.TempDir()
	cfg := catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "wh")}
	open := func() *snapshot.Table {
		cat, err := catalog.Open(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := snapshot.Open(t.Context(), cat, []string{"lake", "race"}, snapshot.OpenOptions{Create: true})
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	a, b := open(), open()
	rng := func(p int32, lo, hi int64, lost bool) mapping.Range {
		return mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: p}, Interval: mapping.Interval{Low: lo, High: hi}, Lost: lost}
	}
	commit := func(tbl *snapshot.Table, rs ...mapping.Range) (snapshot.Result, error) {
		return tbl.Commit(t.Context(), snapshot.Flush{Ranges: rs}, snapshot.CommitOptions{Writer: tbl.Name()})
	}
	if _, err := commit(b, rng(0, 0, 10, false)); err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := commit(b, rng(1, 0, 10, false)); err != nil {
		t.Fatal(err)
	}
	res, err := commit(a, rng(0, 10, 20, false), rng(0, 20, 30, true), rng(0, 30, 40, false))
	if err != nil {
		t.Fatalf("stale writer of partition 0: %v", err)
	}
	if res.Attempts < 2 {
		t.Fatalf("attempts %d: the race did not happen", res.Attempts)
	}
	l, err := a.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if n := l.Next(); n[mapping.TopicPartition{Topic: "t", Partition: 0}] != 40 || n[mapping.TopicPartition{Topic: "t", Partition: 1}] != 10 {
		t.Fatalf("next %v", n)
	}
}
