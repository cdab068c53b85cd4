package connector

import (
	"errors"
	"testing"

	"github.com/floe-dev/floe/snapshot"
)

// TestGroupMemberFailKeepsTheDecisiveError: what rebalance callbacks
// meet between two polls, the loop handles once: a fence resets the
// session, anything else ends it. A later error that ends the session
// must not be dropped behind an earlier fence; otherwise the first error
// stays.
func TestGroupMemberFailKeepsTheDecisiveError(t *testing.T) {
	fence := &snapshot.FencedError{Table: "lake.t"}
	takeOn, other := errors.New("take on partitions"), errors.New("other")
	for _, c := range []struct {
		name string
		errs []error
		want error
	}{
		{"fence then failure", []error{fence, takeOn}, takeOn},
		{"failure then fence", []error{takeOn, fence}, takeOn},
		{"two failures", []error{takeOn, other}, takeOn},
		{"two fences", []error{fence, errSpillLost}, fence},
	} {
		gm := &groupMember{}
		for _, err := range c.errs {
			gm.fail(err)
		}
		if gm.failed != c.want {
			t.Errorf("%s: failed = %v, want %v", c.name, gm.failed, c.want)
		}
	}
}
