package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestVersionCommitFromBuildArg: the Docker image is built without .git
// (.dockerignore), so floe version in it said the commit is unknown (from a
// production user). The Dockerfile's FLOE_COMMIT build argument goes to the
// linker (-X); a binary linked the same way, without VCS information, must
// print that commit. Docker is not needed: the test links as the
// Dockerfile's go build line does.
func TestVersionCommitFromBuildArg(t *testing.T) {
	dockerfile, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ARG FLOE_COMMIT`).Match(dockerfile) {
		t.Fatal("the Dockerfile declares no ARG FLOE_COMMIT")
	}
	m := regexp.MustCompile(`-X (\S+)=\$\{FLOE_COMMIT\}`).FindSubmatch(dockerfile)
	if m == nil {
		t.Fatal(`the Dockerfile's go build does not pass FLOE_COMMIT to the linker (-X VAR=${FLOE_COMMIT})`)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	bin := filepath.Join(t.TempDir(), "floe")
	build := exec.CommandContext(t.Context(), "go", "build", "-buildvcs=false", "-ldflags", "-X "+string(m[1])+"="+commit, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build floe: %v\n%s", err, out)
	}
	text, err := exec.CommandContext(t.Context(), bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "commit      "+commit+"\n") {
		t.Errorf("floe version does not name the commit given at link time:\n%s", text)
	}
	doc, err := exec.CommandContext(t.Context(), bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v versionInfo
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	if v.Commit != commit {
		t.Errorf("version --json commit %q, want %q", v.Commit, commit)
	}
}
