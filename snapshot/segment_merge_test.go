package snapshot_test

import (
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/floe-dev/floe/snapshot"
)

// TestSegmentNameCountsDistinctEntries: a segment's file name
// carries its number of entries (NNNNN-UUID.json). Two named segments that
// hold the same snapshots (two overlapping expiries, or a merge whose
// commit named a segment while another run's still held the entries) are
// absorbed together, and the name counts their union, as the merge
// writes it, not every entry of their indexes.
func TestSegmentNameCountsDistinctEntries(t *testing.T) {
	tbl, _ := maintainTable(t, 6)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	named := namedArchives(tbl)
	if len(named) != 1 {
		t.Fatalf("named %v, want one segment", named)
	}
	// A second segment holding the same entries, with its index, named as
	// an overlapping expiry would have named it.
	orig := named[0]
	dup := path.Join(path.Dir(orig), "00004-"+uuid.NewString()+".json")
	dup = strings.Replace(dup, "file:/", "file:///", 1)
	copyFile := func(from, to string) {
		b, err := os.ReadFile(strings.TrimPrefix(from, "file://"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(strings.TrimPrefix(to, "file://"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx := func(p string) string {
		return strings.Replace(p, "/floe-ledger/", "/floe-ledger-index/", 1)
	}
	copyFile(orig, dup)
	copyFile(idx(orig), idx(dup))
	txn := tbl.Iceberg().NewTransaction()
	key := snapshot.PropLedgerSegmentPrefix + strings.TrimSuffix(path.Base(dup), ".json")
	if err := txn.SetProperties(iceberg.Properties{key: dup}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}

	commitRanges(t, tbl, 6, 10)
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Segments) != 1 || res.Archived != 8 {
		t.Fatalf("after the expiry: segments %v, archived %d; want both duplicates absorbed into one segment of 8", res.Segments, res.Archived)
	}
	seg := res.Segments[0]
	held := len(readArchiveFile(t, seg).Snapshots)
	n, err := strconv.Atoi(strings.SplitN(filepath.Base(seg), "-", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	if n != held {
		t.Fatalf("segment %s is named for %d entries, holds %d", filepath.Base(seg), n, held)
	}
}

// TestMaintainDryRunSeesUnreadableAbsorbedSegment: a dry run of an
// expiry reads the segments its segment would absorb, so it fails where
// the real run fails (here with "nothing was expired").
func TestMaintainDryRunSeesUnreadableAbsorbedSegment(t *testing.T) {
	tbl, _ := maintainTable(t, 4)
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 2}); err != nil {
		t.Fatal(err)
	}
	seg := strings.TrimPrefix(namedArchives(tbl)[0], "file://")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// The segment is damaged (truncated); its index is intact, so the
	// table loads.
	if err := os.WriteFile(seg, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	commitRanges(t, tbl, 4, 8)
	opts := snapshot.MaintainOptions{Expire: true, RetainLast: 2}
	dryOpts := opts
	dryOpts.DryRun = true
	_, dryErr := tbl.Maintain(t.Context(), dryOpts)
	_, realErr := freshTable(t, tbl).Maintain(t.Context(), opts)
	if (dryErr == nil) != (realErr == nil) {
		t.Fatalf("dry run: err %v; real run: err %v; want the dry run to fail as the real run does", dryErr, realErr)
	}
}
