package main

import (
	"slices"
	"strings"
	"testing"
)

// TestRegistryDownNotNeeded (from a new-user run): with
// FLOE_SCHEMA_REGISTRY set, as the local stack's env.sh sets it, and the
// registry down, a sink of plain values (raw or JSON) that never decodes
// with it exited 2 at once ("schema registry ... unavailable, reading its
// subjects"). Only a sink asking for --value or --key registry asks the
// registry at start; the others sink, into a new table and into an
// existing one sunk without the layout flags.
func TestRegistryDownNotNeeded(t *testing.T) {
	st, loc := sinkStack(t)
	dead := "http://" + refusedTCPAddr(t)
	t.Setenv("FLOE_SCHEMA_REGISTRY", dead)
	sink := slices.Concat([]string{"sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--stop-at-end", "--retry-for", "0s"}, loc)
	for _, flags := range [][]string{
		{"--table", "lake.orders"},
		{"--table", "lake.typed", "--value", "json"},
		{"--table", "lake.typed"},
	} {
		if code, out, errs := floe(t, slices.Concat(sink, flags)...); code != 0 {
			t.Errorf("floe sink %v with the registry down: exit %d\n%s\n%s", flags, code, out, errs)
		}
	}
	code, _, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.reg", "--value", "registry"})...)
	if code != exitError || !strings.Contains(errs, "schema registry "+dead+" unavailable") {
		t.Errorf("--value registry with the registry down: exit %d, want %d naming it\n%s", code, exitError, errs)
	}
}
