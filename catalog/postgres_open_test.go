package catalog_test

import (
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
)

// TestPostgresOpenTogether opens eight catalogs at once on a new
// PostgreSQL database, as processes (or a sink and a command) starting
// together do: every open succeeds. They race to create the catalog's
// tables, and PostgreSQL reports a loser as a unique violation or as
// "type ... already exists" (duplicate_object); the second used to fail
// the open.
func TestPostgresOpenTogether(t *testing.T) {
	pg := testenv.Postgres(t)
	warehouse := t.TempDir()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = catalog.Open(t.Context(), catalog.Config{Catalog: pg.URI, Warehouse: warehouse})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
}

// TestPostgresTerminatedConnections (from a review): a PostgreSQL server
// that closes the catalog's idle connections (pg_terminate_backend, as a
// failover, idle_session_timeout or a pooler's restart does) costs no
// catalog operation. The pool handed out the closed connection, and the
// next load or commit failed with "terminating connection due to
// administrator command" (57P01): behind a server that terminated the
// backends every 50-500 ms, a sink's dead-letter reconcile failed at every
// session start.
func TestPostgresTerminatedConnections(t *testing.T) {
	pg := testenv.Postgres(t)
	cat, err := catalog.Open(t.Context(), catalog.Config{Catalog: pg.URI, Warehouse: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"lake", "t"}
	if err := cat.CreateNamespace(t.Context(), ident[:1], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateTable(t.Context(), ident, iceberg.NewSchema(0)); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pg", pg.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for round := range 3 {
		var n int
		if err := admin.QueryRowContext(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("round %d: the catalog holds no connection to terminate", round)
		}
		// The termination reaches the backends asynchronously.
		time.Sleep(200 * time.Millisecond)
		if _, err := cat.LoadTable(t.Context(), ident); err != nil {
			t.Fatalf("round %d: load the table after the server closed %d idle connections of the catalog: %v", round, n, err)
		}
	}
}
