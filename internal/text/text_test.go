package text

import "testing"

func TestRanges(t *testing.T) {
	for _, c := range []struct {
		ps   []int32
		want string
	}{
		{nil, ""},
		{[]int32{5}, "5"},
		{[]int32{0, 1, 2, 4, 6, 7}, "0-2,4,6-7"},
		{[]int32{3, 4, 9}, "3-4,9"},
	} {
		if got := Ranges(c.ps); got != c.want {
			t.Errorf("Ranges(%v) = %q, want %q", c.ps, got, c.want)
		}
	}
}

func TestAndList(t *testing.T) {
	for _, c := range []struct {
		xs   []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, "a"},
		{[]string{"a", "b"}, "a and b"},
		{[]string{"a", "b", "c"}, "a, b and c"},
	} {
		if got := AndList(c.xs); got != c.want {
			t.Errorf("AndList(%v) = %q, want %q", c.xs, got, c.want)
		}
	}
}
