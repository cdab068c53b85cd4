package testenv

import (
	"os/exec"
	"testing"
)

// Tool returns the path of a command-line client a test drives (kcat, the
// aws CLI, chromium), found on PATH. When it is missing the test is
// skipped, or fails under FLOE_REQUIRE_SERVERS=1; install names what
// installs it.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		unavailable(t, "%s is not on PATH (%s)", name, install)
	}
	return path
}
