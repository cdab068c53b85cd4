package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// VersityGWEnv names an environment variable that may hold the path of the
// versitygw binary to use.
const VersityGWEnv = "FLOE_VERSITYGW"

// VersityGW starts a throwaway versitygw S3 gateway in posix mode on a
// t.TempDir(), listening on a free port of 127.0.0.1, and stops it in
// t.Cleanup. The binary is $FLOE_VERSITYGW, else versitygw on PATH, else
// $(go env GOPATH)/bin/versitygw, else one built from tools/go.mod into the
// user cache directory (about a minute the first time, not under -short).
// When none can be had the test is skipped, or fails under
// FLOE_REQUIRE_SERVERS=1.
func VersityGW(t testing.TB) *S3Server {
	t.Helper()
	bin, err := versitygwBinary(t)
	if err != nil {
		unavailable(t, "no versitygw binary: %v", err)
	}
	return startS3(t, &S3Server{
		Kind:             "versitygw",
		ChecksSignatures: true,
		KeepsData:        true,
		command: func(s *S3Server) *exec.Cmd {
			cmd := exec.Command(bin,
				"--port", "127.0.0.1:"+strconv.Itoa(s.Port),
				"--region", s.Region,
				"--quiet",
				"posix", s.Dir)
			cmd.Env = append(os.Environ(),
				"ROOT_ACCESS_KEY="+s.AccessKey,
				"ROOT_SECRET_KEY="+s.SecretKey,
			)
			return cmd
		},
	})
}

// --- finding or building the binary ---

// versitygwMemo is, with minioMemo and motoMemo, the only package-level
// state of testenv, and it is needed: it makes the lookup (which runs `go
// env GOPATH`) and a build happen once per test process, and off Linux,
// where lockFile is a no-op, its mutex is what keeps parallel tests of one
// process from building versitygw at the same time (into the same
// temporary file). memo guards it: get holds its mutex while the lookup
// runs.
var versitygwMemo memo

// versitygwBinary finds or builds the versitygw binary, once per process.
// The outcome, a failure included, holds for the rest of the process.
func versitygwBinary(t testing.TB) (string, error) {
	return versitygwMemo.get(func() (string, error) {
		goBin := goCommand()
		p, err := findBinary(VersityGWEnv, "versitygw", filepath.Join(goPath(goBin), "bin", "versitygw"))
		if p != "" || err != nil {
			return p, err
		}
		return buildVersityGW(t, goBin)
	})
}

// goCommand returns the go command: on PATH, else the one of the toolchain
// that built the test binary.
func goCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// goPath returns the first entry of `go env GOPATH`.
func goPath(goBin string) string {
	out, err := exec.Command(goBin, "env", "GOPATH").Output()
	gp := strings.TrimSpace(string(out))
	if err != nil || gp == "" {
		if gp = os.Getenv("GOPATH"); gp == "" {
			home, _ := os.UserHomeDir()
			gp = filepath.Join(home, "go")
		}
	}
	return filepath.SplitList(gp)[0]
}

var versitygwRequire = regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/versity/versitygw\s+(v\S+)`)

// buildVersityGW builds versitygw from tools/go.mod into
// os.UserCacheDir()/floe/versitygw-VERSION/versitygw, under a file lock so
// that parallel test processes build it once.
func buildVersityGW(t testing.TB, goBin string) (string, error) {
	toolsDir, err := findToolsDir()
	if err != nil {
		return "", fmt.Errorf("not on PATH, not in GOPATH/bin, and cannot build it: %v", err)
	}
	gomod, err := os.ReadFile(filepath.Join(toolsDir, "go.mod"))
	if err != nil {
		return "", err
	}
	m := versitygwRequire.FindSubmatch(gomod)
	if m == nil {
		return "", fmt.Errorf("%s/go.mod does not require github.com/versity/versitygw", toolsDir)
	}
	version := string(m[1])
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no user cache dir to build versitygw into: %v", err)
	}
	dir := filepath.Join(cache, "floe", "versitygw-"+version)
	bin := filepath.Join(dir, "versitygw")
	if isExecutable(bin) {
		return bin, nil
	}
	if testing.Short() && !required() {
		return "", errors.New("not found, and -short does not build it (about a minute)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) { // built by another process while we waited
		return bin, nil
	}
	t.Logf("testenv: building versitygw %s from %s into %s (about a minute the first time)", version, toolsDir, dir)
	start := time.Now()
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	cmd := exec.Command(goBin, "build", "-o", tmp, "github.com/versity/versitygw/cmd/versitygw")
	cmd.Dir = toolsDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build versitygw %s in %s: %v\n%s", version, toolsDir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	t.Logf("testenv: built versitygw in %s", time.Since(start).Round(time.Second))
	return bin, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
