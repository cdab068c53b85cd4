package main

import (
	"strings"
	"testing"
)

// TestWhereOnDeadLetterTable: floe where of a dead-letter table said "has
// no floe commits yet: nothing was sunk into it", and floe as-of --time
// now of it "has sunk nothing yet: it has no rows to show", while it
// holds a dead letter: both say it is the dead-letter table of lake.dl
// and how to read it, as as-of by offsets does (from a review).
func TestWhereOnDeadLetterTable(t *testing.T) {
	_, _, cat, _ := asOfDLSetup(t)
	for _, args := range [][]string{
		{"where", "--table", "lake.dl_dlq", "--partition", "0", "--offset", "1"},
		{"as-of", "--table", "lake.dl_dlq", "--time", "now", "--rows"},
	} {
		code, out, errs := floe(t, append(args, cat...)...)
		if code == exitOK || strings.Contains(errs, "nothing was sunk") || strings.Contains(errs, "sunk nothing") ||
			!strings.Contains(errs, "lake.dl_dlq is the dead-letter table of lake.dl") ||
			!strings.Contains(errs, "floe where --table lake.dl --partition P --offset O") || !strings.Contains(errs, "floe files") {
			t.Errorf("%s on dead-letter table lake.dl_dlq: exit %d\n%s%s; want it named the dead-letter table of lake.dl, with how to read it", args[0], code, out, errs)
		}
	}
}
