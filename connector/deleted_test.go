package connector_test

import (
	"testing"

	"github.com/floe-dev/floe/connector"
)

func TestMarkerType(t *testing.T) {
	for _, c := range []struct {
		key           []byte
		commit, known bool
	}{
		{[]byte{0, 0, 0, 0}, false, true},
		{[]byte{0, 0, 0, 1}, true, true},
		{[]byte{0, 0, 0, 7}, false, false},
		{[]byte{0, 0}, false, false},
	} {
		if commit, known := connector.MarkerType(c.key); commit != c.commit || known != c.known {
			t.Fatalf("MarkerType(%v) = %v, %v", c.key, commit, known)
		}
	}
}
