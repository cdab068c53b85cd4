package snapshot_test

import (
	"log/slog"
	"reflect"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// TestOpenVersionRangesFilesCollected: OpenVersion reads the ledger of an
// earlier table version (floe audit --metadata-location), substituting the
// table's archive as it is now for the version's merged-away segments. A
// wide table keeps each commit's ranges in a ranges file; the version's
// live snapshots' files are collected by maintenance once later expiries
// archived those snapshots (their ranges inline in the archive), so the
// version's ledger could no longer be read: the audit of a report's
// version failed on a wide topic after the next maintenance, though the
// archive holds every range it needs.
func TestOpenVersionRangesFilesCollected(t *testing.T) {
	tbl := wideTable(t, map[string]string{snapshot.PropInlineRangesMax: "0"})
	for i := range 3 {
		commitWide(t, tbl, 4, i)
	}
	location := tbl.Iceberg().MetadataLocation()
	want := freshLedger(t, tbl)
	for i := 3; i < 6; i++ {
		commitWide(t, tbl, 4, i)
	}
	if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	backdate(t, rangesFiles(t, tbl)...)
	res, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.StaleRangesFiles) == 0 {
		t.Fatal("maintenance collected no ranges file: the test changed nothing")
	}
	v, err := snapshot.OpenVersion(t.Context(), tbl.Catalog(), tbl.Identifier(), location, snapshot.OpenOptions{})
	if err != nil {
		t.Fatalf("open the version at %s: %v", location, err)
	}
	got, err := v.Ledger()
	if err != nil {
		t.Fatalf("the ledger of the version at %s, whose snapshots' ranges the archive holds: %v", location, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the version's ledger\n%+v\nwant\n%+v", got, want)
	}
}
