package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTimeFlagsTakeDurations (from a new user's run): floe as-of --time 10m
// was refused while floe dead-letters --since 24h was taken. Every flag
// that takes a time reads it with one parser (mapping.ParseWhen): as-of
// takes a duration as that long ago; a replay, continued by running it
// again, refuses one, giving the time it stands for.
func TestTimeFlagsTakeDurations(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, slices.Concat([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, loc)...)
	code, out, errs := floe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--time", "10m"}, loc)...)
	m := regexp.MustCompile(`as of record time (\S+):`).FindStringSubmatch(out)
	if code != exitOK || m == nil {
		t.Fatalf("as-of --time 10m: exit %d\n%s%s", code, out, errs)
	}
	if at, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || time.Since(at) < 10*time.Minute || time.Since(at) > 11*time.Minute {
		t.Errorf("as-of --time 10m cut at %s (%v), want ten minutes ago", m[1], err)
	}
	code, _, errs = floe(t, slices.Concat([]string{"as-of", "--table", "lake.orders", "--time", "-5m"}, loc)...)
	if code != exitError || !strings.Contains(errs, `--time "-5m": want an RFC3339 time such as 2024-05-01T09:00:00Z, or a duration back from now such as 90m or 24h`) {
		t.Errorf("as-of --time -5m: exit %d\n%s", code, errs)
	}
	code, _, errs = floe(t, slices.Concat([]string{"replay", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.again", "--from", "1h"}, loc)...)
	if code != exitError || !regexp.MustCompile(`--from 1h: a duration back from now is another time at every run, .*give the time it stands for now: 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ`).MatchString(errs) {
		t.Errorf("replay --from 1h: exit %d\n%s", code, errs)
	}
}
