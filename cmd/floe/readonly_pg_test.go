package main

import (
	"database/sql"
	"net/url"
	"strings"
	"testing"

	"github.com/floe-dev/floe/internal/testenv"
)

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

	db, err := sql.Open("pg", pg.URI) // bun's pgdriver, registered by package catalog
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"CREATE ROLE auditor LOGIN PASSWORD 'audit-pw'",
		"GRANT SELECT ON iceberg_tables, iceberg_namespace_properties TO auditor",
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u, err := url.Parse(pg.URI)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("auditor", "audit-pw")
	auditor := u.String()

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
