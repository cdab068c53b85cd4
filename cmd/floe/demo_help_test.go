package main

import (
	"strings"
	"testing"
)

// floe demo --help names every step the demo runs, not only produce and
// sink.
func TestDemoHelpNamesEveryStep(t *testing.T) {
	out := mustFloe(t, "demo", "--help")
	for _, step := range []string{"produce", "sink", "audit", "replay", "as-of", "where", "fold"} {
		if !strings.Contains(out, step) {
			t.Errorf("floe demo --help does not mention %q:\n%s", step, out)
		}
	}
	root := mustFloe(t, "--help")
	for _, line := range strings.Split(root, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "demo" {
			for _, step := range []string{"audit", "replay"} {
				if !strings.Contains(line, step) {
					t.Errorf("floe --help's line for demo does not mention %q: %q", step, line)
				}
			}
		}
	}
}
