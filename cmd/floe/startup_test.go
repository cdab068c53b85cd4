//go:build linux

package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestStartupAllocatesLittle runs floe version (this test binary,
// re-executed as the CLI) with the runtime's init trace and checks what
// the packages' initialisation allocates: every command pays it before it
// does anything. iceberg-go's table/substrait parses Substrait's default
// extension files when it is initialised; with every file of the
// specification that took 32 MB and about 100 ms, which is why go.mod
// replaces the specification by third_party/substrait (the files
// iceberg-go's filters use). The bound is bytes, not time: the machine's
// load does not move it.
func TestStartupAllocatesLittle(t *testing.T) {
	cmd := exec.Command(os.Args[0], "version")
	cmd.Env = append(os.Environ(), cliChildEnv+"=1", "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("floe version: %v\n%s", err, out)
	}
	var total, substrait float64
	for l := range strings.Lines(string(out)) {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(l)
		if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		b, err := strconv.ParseFloat(f[7], 64)
		if err != nil {
			t.Fatalf("init trace line %q: %v", l, err)
		}
		total += b
		if f[1] == "github.com/apache/iceberg-go/table/substrait" {
			substrait = b
		}
	}
	if total == 0 {
		t.Fatalf("no init trace in the output of floe version:\n%s", out)
	}
	t.Logf("initialisation allocates %.1f MB, iceberg-go's table/substrait %.1f MB", total/1e6, substrait/1e6)
	const maxMB, maxSubstraitMB = 20, 8
	if substrait > maxSubstraitMB*1e6 {
		t.Errorf("iceberg-go's table/substrait allocates %.1f MB when initialised, above %d MB: is third_party/substrait still the replacement of github.com/substrait-io/substrait in go.mod?", substrait/1e6, maxSubstraitMB)
	}
	if total > maxMB*1e6 {
		t.Errorf("the packages' initialisation allocates %.1f MB before any command runs, above %d MB", total/1e6, maxMB)
	}
}
