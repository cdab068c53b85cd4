package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExportToMissingDirNotLostDataFile (from a review): as-of --rows
// --output into a folder that does not exist fails with the OS's ENOENT
// for a path ending .parquet: the user's output path, not a data file of
// the table, and the error must not say a data file the table lists is
// gone (a hint keyed on the message's text did).
func TestExportToMissingDirNotLostDataFile(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	out := filepath.Join(t.TempDir(), "no-such-dir", "rows.parquet")
	code, _, errs := floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=5", "--rows", "--output", out}, loc...)...)
	if code == 0 {
		t.Fatalf("export into a missing directory succeeded")
	}
	if strings.Contains(errs, "gone from its storage") {
		t.Errorf("the user's missing output directory is explained as a lost data file of the table:\n%s", errs)
	}
}
