package floetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckBenchPath: a benchmark's path variables are refused when
// relative (go test runs in the package folder, so ./floe typed at the
// repository's root named nothing, found only after the records were
// produced) or naming what is not there, with the variable in the message.
func TestCheckBenchPath(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "floe")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, value string
		kind        BenchPathKind
		want        string // "" when accepted
	}{
		{"FLOE_BENCH_FLOE", "", BenchProgram, ""},
		{"FLOE_BENCH_FLOE", prog, BenchProgram, ""},
		{"FLOE_BENCH_FLOE", "./floe", BenchProgram, "FLOE_BENCH_FLOE=./floe: give an absolute path (go test runs in the package folder): $PWD/floe"},
		{"FLOE_BENCH_BEFORE", filepath.Join(dir, "missing"), BenchProgram, "FLOE_BENCH_BEFORE=" + filepath.Join(dir, "missing") + ": it does not exist; FLOE_BENCH_BEFORE names a floe binary"},
		{"FLOE_BENCH_FLOE", plain, BenchProgram, "not an executable file"},
		{"FLOE_BENCH_FLOE", dir, BenchProgram, "not an executable file"},
		{"FLOE_SOAK_OUT", "after.csv", BenchOutFile, "FLOE_SOAK_OUT=after.csv: give an absolute path (go test runs in the package folder): $PWD/after.csv"},
		{"FLOE_SOAK_OUT", filepath.Join(dir, "after.csv"), BenchOutFile, ""},
		{"FLOE_SOAK_LOG", filepath.Join(dir, "nope", "log"), BenchOutFile, "FLOE_SOAK_LOG=" + filepath.Join(dir, "nope", "log") + ": " + filepath.Join(dir, "nope") + " does not exist"},
		{"FLOE_BENCH_HEAPPROFILE", dir, BenchOutFolder, ""},
		{"FLOE_BENCH_HEAPPROFILE", plain, BenchOutFolder, "is not a folder"},
		{"FLOE_BENCH_CACHE", filepath.Join(dir, "cache"), BenchCacheFolder, ""},
		{"FLOE_BENCH_CACHE", "cache", BenchCacheFolder, "give an absolute path"},
	} {
		err := CheckBenchPath(c.name, c.value, c.kind)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%s: %v, want accepted", c.name, c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s=%s: %v, want an error holding %q", c.name, c.value, err, c.want)
		}
	}
}

// TestBenchPartitionsRange: FLOE_BENCH_PARTITIONS out of range says the
// range (a user's 200000 got "want a number of partitions").
func TestBenchPartitionsRange(t *testing.T) {
	for _, s := range []string{"200000", "0", "-3", "many"} {
		if _, err := benchPartitions(s); err == nil || !strings.Contains(err.Error(), "from 1 to 100000") {
			t.Errorf("FLOE_BENCH_PARTITIONS=%s: %v, want the range 1 to 100000", s, err)
		}
	}
	for s, want := range map[string]int32{"": 4, "1": 1, "100000": 100_000} {
		if n, err := benchPartitions(s); err != nil || n != want {
			t.Errorf("FLOE_BENCH_PARTITIONS=%q: %d, %v; want %d", s, n, err, want)
		}
	}
}
