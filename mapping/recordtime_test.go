package mapping

import (
	"math"
	"testing"
	"time"
)

// TestRecordTime: franz-go's time.Unix(0, millis*1e6) of any timestamp
// within 4.5 million years of 1970, undone by RecordTime; times it did
// not overflow, and RecordTime's own answers, unchanged.
func TestRecordTime(t *testing.T) {
	for _, ms := range []int64{0, -1, 1, 1_700_000_000_000, -62135596800000, -62135596799000, 253402300799999,
		-9223372036854, 9223372036854, -9223372036855, 9223372036855, 1 << 56, -(1 << 56), 1<<57 - 1, -(1 << 57)} {
		franz := time.Unix(0, ms*1e6) // wraps as franz-go's does
		got := RecordTime(franz)
		if got.UnixMilli() != ms {
			t.Errorf("%d ms: franz-go's %s, RecordTime %s (%d ms)", ms, franz.UTC(), got.UTC(), got.UnixMilli())
		}
		if again := RecordTime(got); !again.Equal(got) {
			t.Errorf("%d ms: RecordTime of its own answer %s is %s", ms, got.UTC(), again.UTC())
		}
	}
	for _, tm := range []time.Time{time.Unix(0, 1), time.Unix(0, math.MaxInt64), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if got := RecordTime(tm); !got.Equal(tm) {
			t.Errorf("%s: RecordTime %s", tm, got)
		}
	}
	if now := time.Now().Truncate(time.Millisecond); !RecordTime(now).Equal(now) {
		t.Errorf("now changed: %s", RecordTime(now))
	}
}
