package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/testenv"
)

// TestSinkCreateTableFalse (from a new-user run): a misspelt --table made
// a new table and sank the whole topic into it. --create-table=false
// refuses a missing table before anything is created (neither the table
// nor its dead-letter table), naming the tables that come close, and sinks
// into an existing one as usual; with --topic-regex, whose topics get new
// tables, it is refused.
func TestSinkCreateTableFalse(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	sink := func(extra ...string) (int, string, string) {
		return floe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--stop-at-end", "--value", "json"}, extra, loc)...)
	}
	if code, out, errs := sink("--topic", "orders", "--table", "lake.orders"); code != exitOK {
		t.Fatalf("first sink: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs := sink("--topic", "orders", "--table", "lake.order", "--create-table=false")
	if code != exitError || !strings.Contains(errs, "lake.order") || !strings.Contains(errs, "did you mean lake.orders") || !strings.Contains(errs, "--create-table=false refuses to create it") {
		t.Fatalf("a misspelt --table with --create-table=false: exit %d\n%s\n%s", code, out, errs)
	}
	// Said once: the refusal and the hint of a missing table both said
	// "check --table" (from a new-user run).
	if n := strings.Count(errs, "check --table"); n != 1 {
		t.Errorf("the refusal says \"check --table\" %d times, want once:\n%s", n, errs)
	}
	_, tables, _ := floe(t, append([]string{"status"}, loc...)...)
	if strings.Contains(tables, "lake.order ") || strings.Contains(tables, "lake.order_dlq") {
		t.Fatalf("the refused run created a table:\n%s", tables)
	}
	if code, out, errs := sink("--topic", "orders", "--table", "lake.orders", "--create-table=false"); code != exitOK {
		t.Fatalf("an existing table with --create-table=false: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := sink("--topic-regex", "ord.*", "--table", "lake.{topic}", "--create-table=false"); code != exitError || !strings.Contains(errs, "--topic-regex") {
		t.Fatalf("--create-table=false with --topic-regex: exit %d\n%s", code, errs)
	}
}

// TestSinkNewTableNearAnother (from a new-user run): floe sink --table
// lake.prodcuts created a new table while lake.products exists, without a
// word, where every read command asks "did you mean lake.products?". The
// sink warns, in the log and in its summary, naming the table meant and
// how to undo; not for a new table of a name close to none, nor for the
// misspelt table once it exists.
func TestSinkNewTableNearAnother(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	sink := func(table string) (int, string, string) {
		return floe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--stop-at-end", "--topic", "orders", "--table", table}, loc)...)
	}
	const warning = "this run created table lake.prodcuts, and the catalog has lake.products, of a close name: if --table is misspelt, stop the sink, remove the new table with floe drop --table lake.prodcuts"
	for _, c := range []struct {
		table string
		warn  bool
	}{
		{"lake.products", false},
		{"lake.prodcuts", true},
		{"lake.prodcuts", false}, // it exists now: the run created nothing
		{"lake.elsewhere", false},
	} {
		code, out, errs := sink(c.table)
		warned := strings.Count(errs, "this run created table")
		switch {
		case code != exitOK:
			t.Fatalf("%s: exit %d\n%s\n%s", c.table, code, out, errs)
		case c.warn && (warned != 1 || !strings.Contains(errs, warning) || !strings.Contains(errs, "did_you_mean=lake.products") || !strings.Contains(out, "\nwarning: "+warning)):
			t.Errorf("%s: want one warning in the log and the summary saying %q:\n%s\n%s", c.table, warning, out, errs)
		case !c.warn && (warned != 0 || strings.Contains(out, "warning:")):
			t.Errorf("%s: warned:\n%s\n%s", c.table, out, errs)
		}
	}
}

// TestSinkNewTableShortNamesNotNear (from a new-user run): floe sink into a
// new table lake.po warned that it was perhaps a misspelling of lake.js,
// and one into lake.cdcjs of lake.cdc2: two edits turn any two-letter name
// into any other. A short name is close to another only one edit away; a
// longer one still two (lake.ordres, lake.prodcuts).
func TestSinkNewTableShortNamesNotNear(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	for _, c := range []struct {
		table string
		warn  bool
	}{
		{"lake.js", false},
		{"lake.po", false},
		{"lake.cdc2", false},
		{"lake.cdcjs", false},
		{"lake.jsx", true},
		{"lake.orders", false},
		{"lake.ordres", true},
	} {
		code, out, errs := floe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--stop-at-end", "--topic", "orders", "--table", c.table}, loc)...)
		warned := strings.Contains(errs, "this run created table "+c.table+", and the catalog has")
		if code != exitOK || warned != c.warn {
			t.Errorf("%s: exit %d, warned %v, want %v:\n%s\n%s", c.table, code, warned, c.warn, out, errs)
		}
	}
}

// TestSinkCreateTableFalseEmptyPostgresCatalog (from a new-user run): with
// create-table: false in its config file, as the docs advise for
// production, a sink against a PostgreSQL database that holds no catalog
// yet was told "floe sink creates the catalog's tables", having just run
// floe sink. It is refused as any missing table is, naming the setting and
// how to bootstrap the catalog, and creates nothing; the first sink
// without it creates the catalog and the table.
func TestSinkCreateTableFalseEmptyPostgresCatalog(t *testing.T) {
	st, _ := sinkStack(t)
	pg := testenv.Postgres(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "floe.yaml")
	body := fmt.Sprintf("brokers: [%s]\ncatalog: %s\nwarehouse: %s\nvalue: json\ncreate-table: false\n",
		strings.Join(st.Brokers, ", "), pg.URI, filepath.Join(dir, "warehouse"))
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	sink := func(extra ...string) (int, string, string) {
		return floe(t, append([]string{"sink", "--config", conf, "--topic", "orders", "--table", "lake.orders", "--stop-at-end"}, extra...)...)
	}
	code, out, errs := sink()
	for _, want := range []string{
		"table lake.orders does not exist",
		"the catalog's database holds no Iceberg catalog yet",
		"--create-table=false refuses to create it (leave --create-table out of the first sink, which creates the catalog and the table, then set it false",
	} {
		if code != exitError || !strings.Contains(errs, want) {
			t.Errorf("create-table: false on an empty catalog: exit %d, want %d and %q:\n%s\n%s", code, exitError, want, out, errs)
		}
	}
	if strings.Contains(errs, "floe sink creates the catalog's tables") {
		t.Errorf("the refusal blames a sink never run:\n%s", errs)
	}
	if code, out, errs := floe(t, "status", "--catalog", pg.URI); code != exitError || !strings.Contains(errs, "the database holds no Iceberg catalog") {
		t.Fatalf("the refused run created the catalog: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := sink("--create-table"); code != exitOK {
		t.Fatalf("the first sink, creating the table: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := sink(); code != exitOK {
		t.Fatalf("create-table: false on the table the first sink created: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestSinkCreateTableFalseNoSQLiteCatalog: --create-table=false with a
// SQLite catalog file that does not exist yet is refused as a missing
// table, naming the flag and the first sink that creates the catalog,
// where it said "floe sink creates one" to a user running floe sink; and
// it creates no file.
func TestSinkCreateTableFalseNoSQLiteCatalog(t *testing.T) {
	st, _ := sinkStack(t)
	cat := filepath.Join(t.TempDir(), "catalog.db")
	code, out, errs := floe(t, "sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--catalog", cat, "--create-table=false")
	for _, want := range []string{
		"table lake.orders does not exist: no catalog exists at --catalog " + cat + " yet",
		"--create-table=false refuses to create it (leave --create-table out of the first sink",
	} {
		if code != exitError || !strings.Contains(errs, want) || strings.Contains(errs, "floe sink creates one") {
			t.Errorf("create-table=false without a catalog: exit %d, want %d and %q:\n%s\n%s", code, exitError, want, out, errs)
		}
	}
	if _, err := os.Stat(cat); !os.IsNotExist(err) {
		t.Errorf("the refused run created %s: %v", cat, err)
	}
}
