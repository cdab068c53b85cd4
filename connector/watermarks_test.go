package connector_test

import (
	"testing"

	"github.com/floe-dev/floe/connector"
)

func TestWatermarksLagAndLost(t *testing.T) {
	w := connector.Watermarks{LogStart: 100, LastStable: 150, HighWatermark: 160}
	for _, c := range []struct {
		next, lag, lost int64
	}{
		{next: 0, lag: 50, lost: 100}, // never read: everything retained is lag; [0, 100) was deleted
		{next: 40, lag: 50, lost: 60}, // behind the log start: [40, 100) is loss, not lag
		{next: 100, lag: 50, lost: 0}, // at the log start
		{next: 120, lag: 30, lost: 0}, // in the retained log
		{next: 150, lag: 0, lost: 0},  // at the last stable offset
		{next: 155, lag: 0, lost: 0},  // past it (a transaction still open above): never negative
		{next: 170, lag: 0, lost: 0},  // past the high watermark (recreated topic): never negative
	} {
		if got := w.Lag(c.next); got != c.lag {
			t.Errorf("Lag(%d) = %d, want %d", c.next, got, c.lag)
		}
		if got := w.Lost(c.next); got != c.lost {
			t.Errorf("Lost(%d) = %d, want %d", c.next, got, c.lost)
		}
	}
	// An empty partition whose log was truncated: nothing to sink.
	empty := connector.Watermarks{LogStart: 30, LastStable: 30, HighWatermark: 30}
	if got := empty.Lag(0); got != 0 {
		t.Errorf("empty partition: Lag(0) = %d, want 0", got)
	}
}
