package replay_test

import (
	"strings"
	"testing"

	"github.com/floe-dev/floe/replay"
)

// TestDifferErrorCounts: one key that differs reads "1 key differs" (it
// read "1 keys differ", from a new-user run).
func TestDifferErrorCounts(t *testing.T) {
	for keys, want := range map[int]string{1: "; 1 key differs, first", 5: "; 5 keys differ, first"} {
		err := &replay.DifferError{Table: "lake.t", Branch: "b", Keys: keys}
		if got := err.Error(); !strings.Contains(got, want) {
			t.Errorf("%d keys: %q; want %q", keys, got, want)
		}
	}
}
