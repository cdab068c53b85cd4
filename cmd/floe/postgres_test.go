package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// pgEnv is the production layout on real servers: a PostgreSQL catalog and
// an s3:// warehouse on versitygw, plus an embedded broker.
type pgEnv struct {
	*s3Env
	pg *testenv.PGServer
}

func newPGEnv(t *testing.T) *pgEnv {
	t.Helper()
	e := &pgEnv{s3Env: newS3Env(t), pg: testenv.Postgres(t)}
	e.catalog = e.pg.URI
	return e
}

// runConcurrently runs the CLI once per argument list, all at once, and
// fails the test unless every run exits 0. It returns their outputs.
func runConcurrently(t *testing.T, runs ...[]string) []string {
	t.Helper()
	outs := make([]string, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, args := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stderr string
			outs[i], stderr, errs[i] = floeCtx(context.WithoutCancel(t.Context()), args...)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%w\n%s", errs[i], stderr)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d (%v): %v", i, runs[i], err)
		}
	}
	return outs
}

// TestPostgresTwoSinksDisjointPartitions runs two floe sinks at once on one
// PostgreSQL catalog and one table, each on half of the topic's partitions
// (--partitions), committing small flushes so that their commits race. Both
// must commit everything: a lost race on the catalog row is retried with the
// same files (neither fences the other, since their partitions differ), and
// the table ends with every offset exactly once and a contiguous ledger in
// which both writers appear.
func TestPostgresTwoSinksDisjointPartitions(t *testing.T) {
	e := newPGEnv(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 4, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 4, 1600, count)
	// Create the table first, as a deployment would; both then resume it.
	mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end", "--partitions", "0")...)
	outs := runConcurrently(t,
		e.sinkArgs("orders", "lake.orders", "--stop-at-end", "--flush-records", "40", "--partitions", "0,1"),
		e.sinkArgs("orders", "lake.orders", "--stop-at-end", "--flush-records", "40", "--partitions", "2,3"),
	)
	for i, out := range outs {
		if strings.Contains(out, "fenced") {
			t.Errorf("sink %d was fenced although its partitions are its own:\n%s", i, out)
		}
	}
	ledger := checkTable(t, catalog.Config{Catalog: e.pg.URI, Warehouse: e.warehouse()}, "lake.orders", "orders", count)
	writers := map[string]map[int32]bool{}
	for _, c := range ledger.Commits {
		if writers[c.Writer] == nil {
			writers[c.Writer] = map[int32]bool{}
		}
		for _, r := range c.Ranges {
			writers[c.Writer][r.Partition] = true
		}
	}
	if len(writers) != 3 {
		t.Errorf("%d writers in the ledger, want 3 (the creating run and the two concurrent sinks)", len(writers))
	}
}

// TestPostgresTwoSinksSamePartitions runs two floe sinks on the same
// partitions of one table at once: the zombie case. Whichever loses a race
// on a partition is fenced, drops its files and re-reads the ledger; the
// table still ends with every offset exactly once.
func TestPostgresTwoSinksSamePartitions(t *testing.T) {
	e := newPGEnv(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 2, 800, count)
	mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end", "--partitions", "0")...)
	outs := runConcurrently(t,
		e.sinkArgs("orders", "lake.orders", "--stop-at-end", "--flush-records", "30"),
		e.sinkArgs("orders", "lake.orders", "--stop-at-end", "--flush-records", "30"),
	)
	t.Logf("sink outputs:\n%s\n%s", outs[0], outs[1])
	checkTable(t, catalog.Config{Catalog: e.pg.URI, Warehouse: e.warehouse()}, "lake.orders", "orders", count)
}

// TestPostgresCatalogErrors: a wrong password is reported as rejected
// credentials without showing the password; a catalog shared with
// Spark/Trino is reached under their catalog name (--catalog-name), and
// tables of another name are invisible.
func TestPostgresCatalogErrors(t *testing.T) {
	e := newPGEnv(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 1, 20, count)

	u, err := url.Parse(e.pg.URI)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(e.pg.User, "wrong-password-42")
	code, _, errs := floe(t, append(e.sinkArgs("orders", "lake.orders", "--stop-at-end"), "--catalog", u.String())...)
	if code != exitError || !strings.Contains(errs, "catalog rejected the credentials") || strings.Contains(errs, "wrong-password-42") {
		t.Errorf("wrong password: exit %d, stderr:\n%s", code, errs)
	}

	mustFloe(t, append(e.sinkArgs("orders", "lake.spark_orders", "--stop-at-end"), "--catalog-name", "spark")...)
	code, _, errs = floe(t, "status", "--catalog", e.pg.URI, "--warehouse", e.warehouse(), "--table", "lake.spark_orders")
	if code != exitError || !strings.Contains(errs, "does not exist") {
		t.Errorf("the table of catalog name spark must be invisible under the default name: exit %d\n%s", code, errs)
	}
	out := mustFloe(t, "status", "--catalog", e.pg.URI, "--catalog-name", "spark", "--warehouse", e.warehouse(), "--table", "lake.spark_orders")
	if !strings.Contains(out, "lake.spark_orders") {
		t.Errorf("status under catalog name spark:\n%s", out)
	}
}

// TestPostgresOutage stops the PostgreSQL catalog for about two seconds
// while a live sink commits every few hundred milliseconds: the sink
// retries from the ledger and ends with every record exactly once.
func TestPostgresOutage(t *testing.T) {
	e := newPGEnv(t)
	rideOutOutage(t, e.s3Env, e.pg.Stop, e.pg.Start)
}

// TestOutageNamesTheComponent stops, under a live sink that may not retry
// (--retry-for 0s), the PostgreSQL catalog or the S3 server: the sink exits
// 2 naming the component that went away, and so do the other commands.
// Both fail with a refused connection; a stopped PostgreSQL catalog used to
// read "object store unreachable: cannot reach <the S3 endpoint>". The
// catalog's failure is classified by the catalog floe opened (the commit's
// reload), the object store's by the command's final explanation step (a
// data file write, which does not pass through the catalog).
func TestOutageNamesTheComponent(t *testing.T) {
	for _, c := range []struct {
		name      string
		stop      func(*pgEnv)
		want, not string
	}{
		{"catalog", func(e *pgEnv) { e.pg.Stop() }, "catalog unreachable", "object store unreachable"},
		{"object store", func(e *pgEnv) { e.s3.Stop() }, "object store unreachable", "catalog unreachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newPGEnv(t)
			if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 1, nil); err != nil {
				t.Fatal(err)
			}
			count := map[int32]int64{}
			produceRound(t, e.brokers, "orders", 1, 50, count)
			type result struct {
				code   int
				stderr string
			}
			done := make(chan result, 1)
			go func() {
				code, _, errs := floe(t, e.sinkArgs("orders", "lake.orders", "--flush-records", "10", "--flush-interval", "100ms", "--retry-for", "0s")...)
				done <- result{code, errs}
			}()
			cat, err := catalog.Open(t.Context(), e.catalogConfig())
			if err != nil {
				t.Fatal(err)
			}
			// Once the sink has committed everything, the next flush meets
			// the outage: the object store's when writing its data files,
			// the catalog's when committing them.
			waitFor(t, time.Minute, "the sink to commit the first records", func() bool {
				tbl, err := snapshot.Open(t.Context(), cat, []string{"lake", "orders"}, snapshot.OpenOptions{})
				if err != nil {
					return false
				}
				l, err := tbl.Ledger()
				return err == nil && l.Next()[mapping.TopicPartition{Topic: "orders", Partition: 0}] == count[0]
			})

			c.stop(e)
			produceRound(t, e.brokers, "orders", 1, 20, count)
			var r result
			select {
			case r = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("the sink did not stop")
			}
			if r.code != exitError || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, c.not) {
				t.Errorf("sink: exit %d, want %d and %q; stderr:\n%s", r.code, exitError, c.want, r.stderr)
			}
			for _, cmd := range []string{"status", "audit"} {
				code, _, errs := floe(t, cmd, "--table", "lake.orders", "--catalog", e.catalog, "--warehouse", e.warehouse())
				if code != exitError || !strings.Contains(errs, c.want) || strings.Contains(errs, c.not) {
					t.Errorf("%s: exit %d, want %d and %q; stderr:\n%s", cmd, code, exitError, c.want, errs)
				}
			}
		})
	}
}

// TestPostgresCatalogSetupErrors: a PostgreSQL catalog URL that reaches
// the server but not a usable catalog names the fix: a database that does
// not exist, a database that holds no catalog (a read-only command creates
// none), and a server without TLS asked for it (no sslmode=disable). Each
// printed the driver's words alone (from a new-user run).
func TestPostgresCatalogSetupErrors(t *testing.T) {
	pg := testenv.Postgres(t)
	for _, c := range []struct {
		name        string
		path, query string
		want        string
	}{
		{"no database", "/nodb", "sslmode=disable", "the catalog's database does not exist: create it, or name another in the catalog's URL"},
		{"no catalog", "/postgres", "sslmode=disable", "the database holds no Iceberg catalog"},
		{"no TLS", "", "", "add ?sslmode=disable to the catalog's URL (the password then crosses it in clear)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			u, err := url.Parse(pg.URI)
			if err != nil {
				t.Fatal(err)
			}
			if c.path != "" {
				u.Path = c.path
			}
			u.RawQuery = c.query
			code, _, errs := floe(t, "status", "--catalog", u.String(), "--warehouse", t.TempDir(), "--table", "lake.orders")
			if code != exitError || !strings.Contains(errs, c.want) || !strings.Contains(errs, "check --catalog") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 with %q and check --catalog", code, errs, c.want)
			}
		})
	}
}

// TestPostgresExistingTableNeedsNoWarehouse (from a new-user run): with a
// PostgreSQL catalog, which has no default warehouse, a sink into an
// existing table and a replay onto a branch of it, published, need no
// --warehouse, as the commands that read it need none, also where the
// branch's dead letters get a new table (beside the data table's); a
// replay into a new table does, and its refusal says that only creating a
// table needs it.
func TestPostgresExistingTableNeedsNoWarehouse(t *testing.T) {
	e := newPGEnv(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "ev", 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), e.brokers, localstack.DemoEvents("ev", 2, 50, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	b := strings.Join(e.brokers, ",")
	for _, c := range []struct{ table, value string }{{"lake.ev", "raw"}, {"lake.typed", "json"}} {
		mustFloe(t, e.sinkArgs("ev", c.table, "--stop-at-end", "--value", c.value)...)
		mustFloe(t, "sink", "-b", b, "-t", "ev", "--table", c.table, "--stop-at-end", "--catalog", e.catalog)
		out := mustFloe(t, "replay", "-b", b, "-t", "ev", "--table", c.table, "--branch", "rebuild", "--publish", "--catalog", e.catalog)
		if !strings.Contains(out, "published: main moved") {
			t.Fatalf("replay of %s onto a branch without --warehouse:\n%s", c.table, out)
		}
	}
	if loc := openTable(t, e.catalogConfig(), "lake.typed_rebuild_dlq").Iceberg().Location(); loc != e.warehouse()+"/lake.db/typed_rebuild_dlq" {
		t.Errorf("the branch's dead-letter table is at %s, not beside its data table", loc)
	}
	code, out, errs := floe(t, "replay", "-b", b, "-t", "ev", "--table", "lake.ev2", "--catalog", e.catalog)
	if code != exitError || !strings.Contains(errs, "missing --warehouse (or FLOE_WAREHOUSE): want where catalog postgres://") ||
		!strings.Contains(errs, "(only a run that creates a table needs it)") {
		t.Fatalf("replay into a new table without --warehouse: exit %d\n%s\n%s", code, out, errs)
	}
}
