package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSinkStopsWhenCatalogFileGoes (from a user's recovery run): a live
// sink whose SQLite catalog file is deleted (a disk's file lost) kept
// committing into the deleted file, unseen and ready; once the table was
// registered in a new catalog at that path, both wrote the table's
// metadata, two files of each version. The sink now stops (exit 2) at its
// next commit, naming the file and floe register, when the file is
// deleted, and when another file took its place; the registered table
// then has one metadata file per version.
func TestSinkStopsWhenCatalogFileGoes(t *testing.T) {
	for _, replace := range []bool{false, true} {
		name := map[bool]string{false: "deleted", true: "replaced"}[replace]
		t.Run(name, func(t *testing.T) {
			st, loc := sinkStack(t)
			file := strings.TrimPrefix(strings.TrimPrefix(st.Catalog().Catalog, "sqlite://"), "file:")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			done := liveFloe(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.t", "--flush-interval", "200ms"}, loc...)...)
			waitFor(t, 20*time.Second, "the live sink's first rows", func() bool {
				code, out, _ := floe(t, append([]string{"files", "--table", "lake.t"}, loc[:2]...)...)
				return code == 0 && strings.Contains(out, ".parquet")
			})
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(file + suffix); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
			want := "was deleted"
			if replace {
				want = "was replaced by another file"
				location := strings.TrimSuffix(st.Catalog().Warehouse, "/") + "/lake.db/t"
				mustFloe(t, append([]string{"register", "--table", "lake.t", "--location", location}, loc...)...)
			}
			r := produceUntilStopped(ctx, t, st, done)
			if r.err == nil || !strings.Contains(r.err.Error(), want) || !strings.Contains(r.err.Error(), "floe register") {
				t.Fatalf("live sink after its catalog file %s: %v\nstdout:\n%s\nstderr:\n%s", name, r.err, r.out, r.errs)
			}
			if !replace {
				return
			}
			// One metadata file per version: the stopped sink forked nothing.
			files, err := filepath.Glob(filepath.Join(strings.TrimPrefix(openTable(t, st.Catalog(), "lake.t").Iceberg().Location(), "file://"), "metadata", "*.metadata.json"))
			if err != nil {
				t.Fatal(err)
			}
			versions := map[string]int{}
			for _, f := range files {
				v, _, _ := strings.Cut(filepath.Base(f), "-")
				if versions[v]++; versions[v] > 1 {
					t.Errorf("two metadata files of version %s: the sink wrote into the deleted catalog", v)
				}
			}
			mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.t", "--stop-at-end"}, loc...)...)
			if code, out, errs := floe(t, append([]string{"audit", "--table", "lake.t", "--deep", "--brokers", st.Brokers[0]}, loc[:2]...)...); code != 0 {
				t.Errorf("audit after registering and resuming: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}
