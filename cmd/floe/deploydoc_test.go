package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
)

// guideBlocks returns the ```sh blocks of one section of
// docs/deployment.md, the section whose heading starts with heading.
func guideBlocks(t *testing.T, heading string) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "deployment.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+heading)
	if !ok {
		t.Fatalf("docs/deployment.md has no section %q", heading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestDeploymentGuideLocalStack runs the deployment guide's local-stack
// commands exactly as docs/deployment.md writes them, so that the guide
// breaks this test when the commands stop working: the floe binary is
// built onto PATH, the section's first block ('floe localstack up --dir
// ./floe-local') runs in a fresh working folder on the documented fixed
// ports, and its second block (env.sh, kcat -P, floe sink, status and
// files, aws s3 ls) runs under bash -euo pipefail.
func TestDeploymentGuideLocalStack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the floe binary and runs a local stack; skipped with -short")
	}
	testenv.Tool(t, "kcat", "apt-get install kcat")
	testenv.Tool(t, "aws", "pip install awscli, or apt-get install awscli")
	testenv.Tool(t, "curl", "apt-get install curl")
	for _, port := range []int{localstack.DefaultKafkaPort, localstack.DefaultS3Port, localstack.DefaultRegistryPort} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatalf("the deployment guide's local stack uses the fixed port 127.0.0.1:%d, which is taken (another 'floe localstack up' running?): %v", port, err)
		}
		l.Close()
	}
	blocks := guideBlocks(t, "## The local stack")
	if len(blocks) != 2 {
		t.Fatalf("the local stack section has %d sh blocks, want 2 (start the stack; use it)", len(blocks))
	}
	up, _, _ := strings.Cut(strings.TrimSpace(blocks[0]), "#")
	upArgs := strings.Fields(up)
	if len(upArgs) < 3 || upArgs[0] != "floe" || upArgs[1] != "localstack" || upArgs[2] != "up" {
		t.Fatalf("the section's first block should start the stack with floe localstack up, got %q", blocks[0])
	}

	bin := t.TempDir()
	build := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(bin, "floe"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build floe: %v\n%s", err, out)
	}
	work := t.TempDir()
	home := t.TempDir()
	// The guide's reader has floe on PATH and no AWS or floe settings of
	// their own; the stack's env.sh provides them.
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home,
		"AWS_CONFIG_FILE=" + filepath.Join(home, "aws-config"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "aws-credentials"),
		"AWS_EC2_METADATA_DISABLED=true", "LC_ALL=C.UTF-8"}

	stack := exec.Command(filepath.Join(bin, "floe"), upArgs[1:]...)
	stack.Dir, stack.Env = work, env
	stdout, err := stack.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stackErr strings.Builder
	stack.Stderr = &stackErr
	if err := stack.Start(); err != nil {
		t.Fatal(err)
	}
	// stop interrupts the stack as Ctrl-C would and waits for it to exit.
	stop := sync.OnceValue(func() error {
		_ = stack.Process.Signal(syscall.SIGINT)
		return stack.Wait()
	})
	defer stop()
	ready, exited := make(chan struct{}), make(chan struct{})
	var stackOut strings.Builder
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		isUp := false
		for sc.Scan() { // to the end, so the stack never blocks on its stdout
			if !isUp {
				stackOut.WriteString(sc.Text() + "\n")
				if isUp = strings.Contains(sc.Text(), "floe local stack is up"); isUp {
					close(ready)
				}
			}
		}
	}()
	select {
	case <-ready:
	case <-exited:
		stop()
		t.Fatalf("%s exited:\n%s%s", up, stackOut.String(), stackErr.String())
	case <-time.After(time.Minute):
		t.Fatalf("%s did not come up in a minute:\n%s", up, stackErr.String())
	}

	script := filepath.Join(t.TempDir(), "guide.sh")
	if err := os.WriteFile(script, []byte(blocks[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, "bash", "-euo", "pipefail", script)
	run.Dir, run.Env = work, env
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the guide's block failed: %v\n--- block:\n%s--- output:\n%s--- stack stderr:\n%s", err, blocks[1], out, stackErr.String())
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`sink lake\.orders: 1 row in \d+ commits \(1 file\)`),                                  // floe sink
		regexp.MustCompile(`(?m)^\s*orders\s+0\s+0\s+1\s+1\s+0\s`),                                                // floe status: log [0, 1), table next 1, lag 0
		regexp.MustCompile(`lake\.orders snapshot \d+, committed .*: 1 data files, 1 rows`),                       // floe files
		regexp.MustCompile(`(?m)^orders\s+0\s+0-0\s+1\s+\d+\s+s3://warehouse/lake\.db/orders/data/\S+\.parquet$`), // its file
		regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\d+ lake\.db/orders/data/\S+\.parquet$`),        // aws s3 ls
	} {
		if !want.Match(out) {
			t.Errorf("the guide's block output lacks %s:\n%s", want, out)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("floe localstack up did not stop cleanly on SIGINT: %v\n%s", err, stackErr.String())
	}
}
