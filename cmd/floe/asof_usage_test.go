package main

import (
	"strings"
	"testing"
)

// TestAsOfWithoutPositionNamesNow (from a new-user run): floe as-of with
// neither --offsets nor --time, asked for "the table as it is" (the rows
// of an upsert table, which floe status points to), named --offsets and
// --time with an RFC3339 time or a duration, not --time now, the answer.
func TestAsOfWithoutPositionNamesNow(t *testing.T) {
	code, out, errs := floe(t, "as-of", "--table", "lake.accounts", "--rows")
	if code != exitError || out != "" || !strings.Contains(errs, "--time now") {
		t.Fatalf("as-of without a position: exit %d, stdout %q, stderr %q; want exit 2 naming --time now", code, out, errs)
	}
}
