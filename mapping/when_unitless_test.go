package mapping

import (
	"testing"
	"time"
)

// TestParseWhenUnitless: Go's time.ParseDuration takes a bare 0 (and +0,
// -0) as a duration, so ParseWhen read "0" as now: floe replay --from 0,
// meant as offset 0 (the design's "rebuild from offset 0"), was told to
// give the current time as a duration's meaning, and as-of --time 0 and
// dead-letters --since 0 were the present. A duration back from now has a
// unit (10m, 0s); a bare number is no time.
func TestParseWhenUnitless(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, in := range []string{"0", "+0", "-0", "00"} {
		if got, ago, ok := ParseWhen(in, now); ok {
			t.Errorf("ParseWhen(%q) = %v, ago %v, ok; want refused: a number without a unit is no duration", in, got, ago)
		}
	}
}
