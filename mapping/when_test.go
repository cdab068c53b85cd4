package mapping

import (
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in      string
		want    time.Time
		ago, ok bool
	}{
		{"2024-05-01T09:00:00Z", time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC), false, true},
		{" 10m ", now.Add(-10 * time.Minute), true, true},
		{"24h", now.Add(-24 * time.Hour), true, true},
		{"0s", now, true, true},
		{"-5m", time.Time{}, false, false},
		{"7d", time.Time{}, false, false},
		{"yesterday", time.Time{}, false, false},
	} {
		got, ago, ok := ParseWhen(c.in, now)
		if !got.Equal(c.want) || ago != c.ago || ok != c.ok {
			t.Errorf("ParseWhen(%q) = %v, %v, %v; want %v, %v, %v", c.in, got, ago, ok, c.want, c.ago, c.ok)
		}
	}
}
