package mapping

import (
	"strings"
	"time"
)

// TimeForms describes the times ParseWhen reads, for the messages of the
// flags that take one.
const TimeForms = "an RFC3339 time such as 2024-05-01T09:00:00Z, or a duration back from now such as 90m or 24h (hours, minutes, seconds: no days)"

// ParseWhen reads a time as floe's flags take one (floe as-of --time,
// floe dead-letters --since, floe replay --from and --until): an RFC 3339
// time, or a duration (Go's: 90m, 24h, 1h30m), meaning that long before
// now, to the millisecond. ago reports the second form, whose time moves
// with now. ok is false for anything else, a negative duration among them;
// the caller words the refusal (TimeForms).
func ParseWhen(s string, now time.Time) (t time.Time, ago, ok bool) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, false, true
	}
	// A unit is required: Go's ParseDuration takes a bare 0, which a
	// user means as an offset (replay --from 0), not as now.
	if d, err := time.ParseDuration(s); err == nil && d >= 0 && strings.ContainsAny(s, "hmsuµn") {
		// To the millisecond, as Kafka stamps records: a new user's 10m
		// printed as 02:07:39.487010378Z.
		return now.Add(-d).Truncate(time.Millisecond), true, true
	}
	return time.Time{}, false, false
}
