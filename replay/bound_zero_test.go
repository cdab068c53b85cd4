package replay

import (
	"strings"
	"testing"
)

// TestParseBoundBareZero: --from 0 (offset 0, as a user of "rebuild from
// offset 0" types it) was read as a duration of 0 back from now and
// refused with "give the time it stands for now: <the current time>",
// advice to replay from now. It is refused naming the forms a bound takes
// (offsets are P=OFFSET).
func TestParseBoundBareZero(t *testing.T) {
	for _, from := range []bool{true, false} {
		_, err := ParseBound("0", "orders", from)
		if err == nil || strings.Contains(err.Error(), "duration back from now") || !strings.Contains(err.Error(), "P=OFFSET") {
			t.Errorf("ParseBound(\"0\", from %v): %v; want the forms a bound takes (P=OFFSET), not a duration's advice", from, err)
		}
	}
}
