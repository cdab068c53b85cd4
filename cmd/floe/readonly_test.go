package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyCommandsCreateNothing: commands that work on an existing
// table, run where there is no catalog, exit 2 with one line naming the
// catalog path they looked at, and leave the current folder as it was (no
// ./floe-data/ appears). floe status without --table (the catalog's
// tables) created the catalog and said it had no tables (from a new-user
// run).
func TestReadOnlyCommandsCreateNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	table := []string{"--table", "lake.orders"}
	commands := [][]string{
		{"where", "--topic", "orders", "--partition", "0", "--offset", "1"},
		{"as-of", "--offsets", "orders/0=1"},
		{"audit"},
		{"status"},
		{"files"},
		{"maintain"},
		{"status", "--json"},
	}
	for i, c := range commands {
		for spec, want := range map[string]string{
			"":                filepath.Join(dir, "floe-data", "catalog.db"),
			"typo/catalog.db": filepath.Join(dir, "typo", "catalog.db"),
		} {
			args := append(append([]string{c[0]}, table...), c[1:]...)
			if i == len(commands)-1 {
				args = c // the listing of the catalog's tables
			}
			if spec != "" {
				args = append(args, "--catalog", spec)
			}
			code, out, errs := floe(t, args...)
			if code != exitError || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "catalog not found: SQLite catalog "+want+" does not exist") {
				t.Errorf("floe %s: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s", strings.Join(args, " "), code, out, errs, want)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 0 {
		t.Errorf("read-only commands left %v in the current folder", entries)
	}
}

// TestSinkSaysItCreatesACatalog: floe sink with --catalog in a folder that
// does not exist creates the catalog and logs that it does; the read-only
// commands then read it without --warehouse, and create no warehouse
// folder of their own.
func TestSinkSaysItCreatesACatalog(t *testing.T) {
	st, _ := sinkStack(t)
	dir := t.TempDir()
	t.Chdir(dir)
	wh := filepath.Join(t.TempDir(), "warehouse")
	code, _, errs := floe(t, "sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--catalog", "new/catalog.db", "--warehouse", wh)
	path := filepath.Join(dir, "new", "catalog.db")
	if code != exitOK || !strings.Contains(errs, "creating a new SQLite catalog") || !strings.Contains(errs, path) {
		t.Fatalf("sink into a new catalog: exit %d, stderr:\n%s\nwant a log line naming %s", code, errs, path)
	}
	for _, args := range [][]string{
		{"status"}, {"audit"}, {"files"},
		{"where", "--topic", "orders", "--partition", "0", "--offset", "1"},
	} {
		args = append(args, "--table", "lake.orders", "--catalog", "new/catalog.db")
		if code, out, errs := floe(t, args...); code != exitOK || strings.Contains(errs, "creating") {
			t.Errorf("floe %s without --warehouse: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "floe-data")); !os.IsNotExist(err) {
		t.Errorf("a read-only command created ./floe-data (%v)", err)
	}
}

// TestTableNameSuggested: a mistyped --table gets the catalog's tables of
// a name close to it, as a mistyped flag gets its flag; and a sink that
// creates a table whose name differs from another's only in case warns
// (engines that fold case take them for one). Both went without a word
// (from a new-user run).
func TestTableNameSuggested(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "-b", st.Brokers[0], "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	for _, typo := range []string{"lake.ordrs", "Lake.Orders"} {
		code, _, errs := floe(t, append([]string{"status", "--table", typo}, loc...)...)
		if code != exitError || !strings.Contains(errs, "(did you mean lake.orders?)") {
			t.Errorf("status --table %s: exit %d\n%s", typo, code, errs)
		}
	}
	code, _, errs := floe(t, append([]string{"sink", "-b", st.Brokers[0], "-t", "orders", "--table", "Lake.Orders", "--stop-at-end"}, loc...)...)
	if code != exitOK || !strings.Contains(errs, "differs from another's only in case") || !strings.Contains(errs, "other=lake.orders") {
		t.Errorf("sink --table Lake.Orders beside lake.orders: exit %d\n%s", code, errs)
	}
}
