package main

import (
	"database/sql"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
)

// selectOnlyRole creates a PostgreSQL role that may only SELECT from the
// catalog's tables at uri, and returns the URI that logs in as it.
func selectOnlyRole(t *testing.T, uri, name string) string {
	t.Helper()
	db, err := sql.Open("pg", uri) // bun's pgdriver, registered by package catalog
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s-pw'", name, name),
		"GRANT SELECT ON iceberg_tables, iceberg_namespace_properties TO " + name,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(name, name+"-pw")
	return u.String()
}

// TestPostgresReadsWithoutWarehouse: the commands that read existing tables
// need no --warehouse with a PostgreSQL catalog, and write nothing to it: a
// role that may only SELECT from the catalog's two tables runs them. (With
// iceberg-go's default of creating the catalog tables on open, the same
// role is refused, which shows the grant is what the test says.)
func TestPostgresReadsWithoutWarehouse(t *testing.T) {
	pg := testenv.Postgres(t)
	st, _ := sinkStack(t)
	mustFloe(t, "sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--catalog", pg.URI, "--warehouse", t.TempDir())

	auditor := selectOnlyRole(t, pg.URI, "auditor")

	for _, args := range [][]string{
		{"status"}, {"audit"}, {"files"},
		{"where", "--topic", "orders", "--partition", "0", "--offset", "1"},
		{"as-of", "--offsets", "orders/0=5"},
	} {
		args = append(args, "--table", "lake.orders", "--catalog", auditor)
		if code, out, errs := floe(t, args...); code != exitOK {
			t.Errorf("floe %s as a read-only role without --warehouse: exit %d\nstdout:\n%s\nstderr:\n%s", args[0], code, out, errs)
		}
	}
	code, _, errs := floe(t, "status", "--table", "lake.orders", "--catalog", auditor, "--catalog-prop", "init_catalog_tables=true")
	if code != exitError || !strings.Contains(errs, "permission denied") {
		t.Errorf("creating the catalog tables as the read-only role: exit %d, stderr %q; want permission denied", code, errs)
	}
}

// TestPostgresPrivilegeErrorSaysWhatIsNeeded (from a new-user run): a
// sink as a role without the privileges it needs printed the driver's
// "permission denied for schema public" (or "for table iceberg_tables")
// alone. The error now says what a sink needs. A role with SELECT, INSERT,
// UPDATE and DELETE on the catalog's tables and no CREATE on the schema
// (least privilege, from a production user) sinks once the tables exist,
// without --catalog-prop init_catalog_tables=false: iceberg-go's CREATE
// TABLE IF NOT EXISTS at open, which PostgreSQL refuses it even for tables
// that exist, is skipped. Before they exist, it gets the error and hint.
func TestPostgresPrivilegeErrorSaysWhatIsNeeded(t *testing.T) {
	pg := testenv.Postgres(t)
	st, _ := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	wh := t.TempDir()

	db, err := sql.Open("pg", pg.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(qs ...string) {
		for _, q := range qs {
			if _, err := db.ExecContext(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	as := func(user, password string) string {
		u, err := url.Parse(pg.URI)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(user, password)
		return u.String()
	}
	sinkAs := func(args ...string) (int, string) {
		code, _, errs := floe(t, append([]string{"sink", "--brokers", brokers, "--topic", "orders", "--stop-at-end", "--warehouse", wh}, args...)...)
		return code, errs
	}
	want := "the catalog's user lacks a privilege"
	// PostgreSQL 15 and later grant no CREATE on schema public to every
	// role; older ones do.
	exec("REVOKE CREATE ON SCHEMA public FROM PUBLIC", "CREATE ROLE writer LOGIN PASSWORD 'writer-pw'")
	if code, errs := sinkAs("--table", "lake.orders", "--catalog", as("writer", "writer-pw")); code != exitError ||
		!strings.Contains(errs, "permission denied") || !strings.Contains(errs, want) || !strings.Contains(errs, "CREATE on the schema") {
		t.Errorf("writer before the catalog's tables exist: exit %d, stderr %q; want exit 2, permission denied and %q", code, errs, want)
	}

	mustFloe(t, "sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders", "--stop-at-end", "--catalog", pg.URI, "--warehouse", wh)
	exec("CREATE ROLE reader LOGIN PASSWORD 'reader-pw'",
		"GRANT SELECT ON iceberg_tables, iceberg_namespace_properties TO reader",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON iceberg_tables, iceberg_namespace_properties TO writer")
	if code, errs := sinkAs("--table", "lake.more", "--catalog", as("reader", "reader-pw"), "--catalog-prop", "init_catalog_tables=false"); code != exitError ||
		!strings.Contains(errs, "permission denied") || !strings.Contains(errs, want) {
		t.Errorf("reader creating a table: exit %d, stderr %q; want exit 2, permission denied and %q", code, errs, want)
	}
	for _, table := range []string{"lake.orders", "lake.copy"} {
		if code, errs := sinkAs("--table", table, "--catalog", as("writer", "writer-pw")); code != exitOK {
			t.Errorf("writer (no CREATE on the schema) sinking %s without --catalog-prop: exit %d, stderr:\n%s", table, code, errs)
		}
	}
	mustFloe(t, "sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.copy2", "--stop-at-end", "--warehouse", wh,
		"--catalog", as("writer", "writer-pw"), "--catalog-prop", "init_catalog_tables=false")
}

// TestPostgresCompactionRefusedLeavesNoFiles (from a new-user run): floe
// maintain --compact as a role that may only SELECT from the catalog's
// tables retried its commit five times as "outcome unknown" and kept the
// files it wrote, orphans. PostgreSQL's permission error is a refusal:
// nothing was applied, so the compaction stops at its first attempt,
// deletes what it wrote and says what the role lacks.
func TestPostgresCompactionRefusedLeavesNoFiles(t *testing.T) {
	pg := testenv.Postgres(t)
	st, _ := sinkStack(t)
	wh := t.TempDir()
	mustFloe(t, "sink", "--brokers", strings.Join(st.Brokers, ","), "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--flush-records", "20", "--catalog", pg.URI, "--warehouse", wh)
	compactor := selectOnlyRole(t, pg.URI, "compactor")
	before := parquetFiles(t, wh)
	code, out, errs := floe(t, "maintain", "--compact", "--table", "lake.orders", "--catalog", compactor, "--warehouse", wh)
	if code != exitError || !strings.Contains(errs, "the catalog refused the commit, nothing was committed") ||
		!strings.Contains(errs, "the catalog's user lacks a privilege") || strings.Contains(out+errs, "attempt 5") {
		t.Errorf("compaction as a SELECT-only role: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if after := parquetFiles(t, wh); after != before {
		t.Errorf("%d Parquet files after the refused compaction, %d before: it left what it wrote", after, before)
	}
}

// TestPostgresSinkCommitRefusedLeavesNoFiles: a sink as a role that may
// only SELECT from the catalog's tables retried each commit five times as
// "outcome unknown", then stopped saying its files were orphans for
// maintenance. PostgreSQL's permission error is a refusal: the sink stops
// at its first attempt, deletes what the flush wrote and says what the
// role lacks; what was committed before stays.
func TestPostgresSinkCommitRefusedLeavesNoFiles(t *testing.T) {
	pg := testenv.Postgres(t)
	st, _ := sinkStack(t)
	wh := t.TempDir()
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, "sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--catalog", pg.URI, "--warehouse", wh)
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 3, 30, time.Now(), 2)); err != nil {
		t.Fatal(err)
	}
	before := parquetFiles(t, wh)
	reader := selectOnlyRole(t, pg.URI, "sinker")
	code, out, errs := floe(t, "sink", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders",
		"--stop-at-end", "--catalog", reader, "--warehouse", wh)
	if code != exitError || !strings.Contains(errs, "the catalog refused the commit, nothing was committed") ||
		!strings.Contains(errs, "the catalog's user lacks a privilege") || strings.Contains(out+errs, "attempt=2") {
		t.Errorf("sink as a SELECT-only role: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if after := parquetFiles(t, wh); after != before {
		t.Errorf("%d Parquet files after the refused commit, %d before: the sink left what it wrote", after, before)
	}
	mustFloe(t, "audit", "--table", "lake.orders", "--catalog", pg.URI, "--warehouse", wh)
}

// parquetFiles counts the Parquet files under dir.
func parquetFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
