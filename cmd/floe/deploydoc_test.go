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
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
)

// docBlocks returns the ```sh blocks of one section of the Markdown file
// doc (a path from the repository's root), the section whose heading line
// starts with heading; with heading "" the whole file.
func docBlocks(t *testing.T, doc, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil {
		t.Fatal(err)
	}
	section := string(b)
	if heading != "" {
		var ok bool
		if _, section, ok = strings.Cut(section, "\n"+heading); !ok {
			t.Fatalf("%s has no section %q", doc, heading)
		}
		if end := strings.Index(section, "\n## "); end >= 0 {
			section = section[:end]
		}
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)```").FindAllStringSubmatch("\n"+section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// runStackGuide runs a guide section's commands exactly as the section
// writes them, so that the guide breaks a test when they stop working:
// the floe binary is built onto PATH, the section's first block ('floe
// localstack up --dir ./floe-local') runs in a fresh working folder on the
// documented fixed ports, and its second block runs there under bash -euo
// pipefail. It returns the second block's output and the working folder.
func runStackGuide(t *testing.T, doc, heading string) (out, work string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the floe binary and runs a local stack; skipped with -short")
	}
	blocks := docBlocks(t, doc, heading)
	for _, l := range strings.Split(strings.Join(blocks, "\n"), "\n") {
		if code, _, _ := strings.Cut(l, "#"); strings.Contains(code, "kcat ") {
			testenv.Tool(t, "kcat", "apt-get install kcat")
		}
	}
	for _, port := range []int{localstack.DefaultKafkaPort, localstack.DefaultS3Port, localstack.DefaultRegistryPort} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatalf("the guide's local stack uses the fixed port 127.0.0.1:%d, which is taken (another 'floe localstack up' running?): %v", port, err)
		}
		l.Close()
	}
	if len(blocks) != 2 {
		t.Fatalf("%s, section %q, has %d sh blocks, want 2 (start the stack; use it)", doc, heading, len(blocks))
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
	work = t.TempDir()
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
	b, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the guide's block failed: %v\n--- block:\n%s--- output:\n%s--- stack stderr:\n%s", err, blocks[1], b, stackErr.String())
	}
	if err := stop(); err != nil {
		t.Errorf("floe localstack up did not stop cleanly on SIGINT: %v\n%s", err, stackErr.String())
	}
	return string(b), work
}

// TestDeploymentGuideLocalStack runs the local-stack section of
// docs/deployment.md as written (runStackGuide): env.sh, floe produce, curl to
// the registry, floe sink, status and files, aws s3 ls.
func TestDeploymentGuideLocalStack(t *testing.T) {
	testenv.Tool(t, "aws", "pip install awscli, or apt-get install awscli")
	testenv.Tool(t, "curl", "apt-get install curl")
	out, _ := runStackGuide(t, "docs/deployment.md", "## The local stack")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`produced 1 record to orders: orders/0 \[0, 1\)`),                                           // floe produce
		regexp.MustCompile(`sink lake\.orders \(new table\): 1 row in \d+ commits \(1 file\)`),                         // floe sink
		regexp.MustCompile(`(?m)^\s*orders\s+0\s+0\s+1\s+1\s+0\s`),                                                     // floe status: log [0, 1), table next 1, lag 0
		regexp.MustCompile(`lake\.orders snapshot \d+, committed .*: 1 data file, 1 row,`),                             // floe files
		regexp.MustCompile(`(?m)^orders\s+0\s+\[0, 1\)\s+1\s+\d+\s+s3://warehouse/lake\.db/orders/data/\S+\.parquet$`), // its file
		regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\d+ lake\.db/orders/data/\S+\.parquet$`),             // aws s3 ls
	} {
		if !want.MatchString(out) {
			t.Errorf("the guide's block output lacks %s:\n%s", want, out)
		}
	}
}

// TestReadmeWalkthrough runs the README's five-minute walkthrough as
// written (runStackGuide): produce 1,000 orders with floe produce, sink them,
// status, files, where, and an audit that writes its HTML report.
func TestReadmeWalkthrough(t *testing.T) {
	out, work := runStackGuide(t, "README.md", "## Five minutes on a local stack")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`produced 1000 records to orders: orders/0 \[0, 1000\)`),                                          // floe produce, as the README quotes it
		regexp.MustCompile(`sink lake\.orders \(new table\): 1000 rows in 2 commits \(1 file\)`),                             // floe sink, as the README quotes it
		regexp.MustCompile(`(?m)^\s*orders\s+0\s+0\s+1000\s+1000\s+0\s`),                                                     // floe status: log [0, 1000), next 1000, lag 0
		regexp.MustCompile(`(?m)^orders\s+0\s+\[0, 1000\)\s+1000\s+\d+\s+s3://warehouse/lake\.db/orders/data/\S+\.parquet$`), // floe files
		regexp.MustCompile(`orders/0 offset 10 in lake\.orders: row`),                                                        // floe where
		regexp.MustCompile(`verdict: COMPLETE`),                                                                              // floe audit
	} {
		if !want.MatchString(out) {
			t.Errorf("the walkthrough's output lacks %s:\n%s", want, out)
		}
	}
	page, err := os.ReadFile(filepath.Join(work, "audit.html"))
	if err != nil || !strings.Contains(string(page), "COMPLETE") {
		t.Errorf("the walkthrough's audit.html (%v) does not show the verdict:\n%.300s", err, page)
	}
}

// TestReadmeBlocks keeps every sh block of the README run by a test: the
// first is the two commands a newcomer runs (the demo is run here as
// written, in a temporary TMPDIR; the test command is the suite this test
// is part of), the others are the walkthrough TestReadmeWalkthrough runs.
func TestReadmeBlocks(t *testing.T) {
	blocks := docBlocks(t, "README.md", "")
	walk := docBlocks(t, "README.md", "## Five minutes on a local stack")
	if len(blocks) != 1+len(walk) {
		t.Fatalf("the README has %d sh blocks: the two commands and the walkthrough's %d are run by tests, the others by none (write them as text, or move them to a walkthrough a test runs)", len(blocks), len(walk))
	}
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(blocks[0]), "\n") {
		c, _, _ := strings.Cut(l, "#")
		cmds = append(cmds, strings.TrimSpace(c))
	}
	// The connector package alone takes 8-9 minutes, close to go test's
	// default 10: the README's command allows what .ci/run allows.
	if want := []string{"go run ./cmd/floe demo", "go test -timeout 40m ./..."}; !slices.Equal(cmds, want) {
		t.Fatalf("the README starts with %q, want the two commands %q", cmds, want)
	}
	if testing.Short() {
		t.Skip("runs the demo with go run; skipped with -short")
	}
	demo := exec.CommandContext(t.Context(), "go", "run", "./cmd/floe", "demo")
	demo.Dir, demo.Env = filepath.Join("..", ".."), append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := demo.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "verdict: COMPLETE") {
		t.Fatalf("%s: %v\n%s", cmds[0], err, out)
	}
}

// TestScheduledAuditScriptAsDocumented runs the cron script of
// docs/deployment.md, "A scheduled audit", with sh as written but for its
// paths: it exits 0 on a complete table, writing its report, and 2 when
// floe status cannot read the catalog (a catalog down, a secret missing
// from cron's environment) or lists no table; its loop over a failed
// status's output ran over nothing and exited 0 (seen by a deployment
// walk-through).
func TestScheduledAuditScriptAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the floe binary; skipped with -short")
	}
	testenv.Tool(t, "jq", "apt-get install jq")
	var script string
	for _, b := range docBlocks(t, "docs/deployment.md", "### A scheduled audit") {
		if strings.Contains(b, "floe-audit.sh") {
			script = b
		}
	}
	if script == "" {
		t.Fatal("docs/deployment.md, A scheduled audit, has no block of the floe-audit.sh script")
	}
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)

	bin := buildFloe(t)
	dir := t.TempDir()
	config, secrets, audits := filepath.Join(dir, "floe.yaml"), filepath.Join(dir, "secrets.env"), filepath.Join(dir, "audits")
	cfg := st.Catalog()
	if err := os.WriteFile(config, fmt.Appendf(nil, "brokers: [%s]\nwarehouse: %s\n", strings.Join(st.Brokers, ", "), cfg.Warehouse), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/etc/floe/floe.yaml", "/etc/floe/secrets.env", "/usr/local/bin/floe", "/var/lib/floe/audits"} {
		if !strings.Contains(script, path) {
			t.Fatalf("the script no longer names %s; update this test:\n%s", path, script)
		}
	}
	script = strings.NewReplacer("/etc/floe/floe.yaml", config, "/etc/floe/secrets.env", secrets,
		"/usr/local/bin/floe", bin, "/var/lib/floe/audits", audits).Replace(script)
	run := func(catalogURI string) (int, string) {
		t.Helper()
		if err := os.WriteFile(secrets, []byte("export FLOE_CATALOG="+catalogURI+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(t.Context(), "sh", "-c", script)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()} // cron's bare environment
		out, err := cmd.CombinedOutput()
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(cfg.Catalog); code != 0 {
		t.Fatalf("the script on a complete table: exit %d, want 0\n%s", code, out)
	}
	reports, err := filepath.Glob(filepath.Join(audits, "*", "lake.orders.json"))
	if err != nil || len(reports) != 1 {
		t.Fatalf("the script's report of lake.orders: %v %v", reports, err)
	}
	doc, err := os.ReadFile(reports[0])
	if err != nil {
		t.Fatal(err)
	}
	if rep := decodeAudit(t, string(doc)); !rep.Complete {
		t.Errorf("the script's report of lake.orders is not complete:\n%s", doc)
	}
	if code, out := run(filepath.Join(dir, "gone", "catalog.db")); code != 2 {
		t.Errorf("the script with a catalog it cannot read: exit %d, want 2\n%s", code, out)
	}
	empty := filepath.Join(dir, "empty.db")
	if _, err := catalog.Open(t.Context(), catalog.Config{Catalog: empty, Warehouse: cfg.Warehouse}); err != nil {
		t.Fatal(err)
	}
	if code, out := run(empty); code != 2 || !strings.Contains(out, "no table with a commit in the catalog") {
		t.Errorf("the script on a catalog without tables: exit %d, want 2\n%s", code, out)
	}
}
