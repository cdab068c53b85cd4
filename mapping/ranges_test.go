package mapping

import "testing"

// TestPastLeadingLost: the first offset moves past the lost intervals that
// begin the coverage at it, chained and in any order, and stops at a gap
// or at an interval that does not reach it.
func TestPastLeadingLost(t *testing.T) {
	for _, c := range []struct {
		first int64
		lost  []Interval
		want  int64
	}{
		{0, nil, 0},
		{0, []Interval{{0, 15}}, 15},
		{0, []Interval{{15, 20}, {0, 15}}, 20},
		{0, []Interval{{0, 15}, {16, 20}}, 15},
		{5, []Interval{{10, 20}}, 5},
		{5, []Interval{{0, 8}}, 8},
	} {
		if got := PastLeadingLost(c.first, c.lost); got != c.want {
			t.Errorf("PastLeadingLost(%d, %v) = %d, want %d", c.first, c.lost, got, c.want)
		}
	}
}
