package connector_test

import (
	"testing"

	"github.com/floe-dev/floe/connector"
)

func TestCleanupPolicy(t *testing.T) {
	e := newEnv(t)
	compact, both := "compact", "compact,delete"
	e.Topic("plain", 1, nil)
	e.Topic("compacted", 1, map[string]*string{"cleanup.policy": &compact})
	e.Topic("both", 1, map[string]*string{"cleanup.policy": &both})
	b := e.Dial()
	for topic, want := range map[string]struct {
		policy   string
		compacts bool
	}{
		"plain":     {"delete", false},
		"compacted": {"compact", true},
		"both":      {"compact,delete", true},
	} {
		got, err := b.CleanupPolicy(e.Ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if got != want.policy || connector.Compacts(got) != want.compacts {
			t.Errorf("%s: cleanup.policy %q (compacts %v), want %q (%v)", topic, got, connector.Compacts(got), want.policy, want.compacts)
		}
	}
	if _, err := b.CleanupPolicy(e.Ctx, "missing"); err == nil {
		t.Error("cleanup.policy of a topic that does not exist: no error")
	}
	for policy, want := range map[string]bool{"delete": false, "compact": true, " Compact , delete": true, "": false} {
		if got := connector.Compacts(policy); got != want {
			t.Errorf("Compacts(%q) = %v, want %v", policy, got, want)
		}
	}
}
