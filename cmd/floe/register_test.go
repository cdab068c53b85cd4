package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
)

// registerAudit runs floe audit at the ledger, file, row and broker levels
// on table and fails the test unless it is complete.
func registerAudit(t *testing.T, brokers []string, table string, loc ...string) {
	t.Helper()
	out := mustFloe(t, append([]string{"audit", "--table", table, "--deep", "--brokers", strings.Join(brokers, ","), "--json"}, loc...)...)
	if doc := decodeAudit(t, out); !doc.Complete || len(doc.Findings) > 0 {
		t.Errorf("audit of %s after registering it: complete %v, findings %+v", table, doc.Complete, doc.Findings)
	}
}

// TestRegisterAfterLostCatalog: a table sunk with a dead letter, whose
// SQLite catalog is lost (a new, empty catalog file), is registered from
// its location in the new catalog with its dead-letter table, which the
// registration names; the audit then finds it complete, floe status
// reads it, and a sink resumes it from the ledger with no record twice.
// The bad cases are refused with what to fix, writing nothing.
func TestRegisterAfterLostCatalog(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "orders", Partition: 0, Value: []byte("not json")}}); err != nil {
		t.Fatal(err)
	}
	brokers := strings.Join(st.Brokers, ",")
	sink := func(catalogArgs []string) string {
		return mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--value", "json", "--stop-at-end"}, catalogArgs...)...)
	}
	if out := sink(loc); !strings.Contains(out, "300 rows and 1 dead letter") {
		t.Fatalf("sink: %s", out)
	}
	location := filepath.Join(st.Catalog().Warehouse, "lake.db", "orders")
	dlqLocation := filepath.Join(st.Catalog().Warehouse, "lake.db", "orders_dlq")

	// The catalog is lost; the warehouse is not.
	fresh := []string{"--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", st.Catalog().Warehouse}
	register := func(args ...string) (int, string, string) {
		return floe(t, append(append([]string{"register"}, args...), fresh...)...)
	}

	code, out, errs := register("--table", "lake.orders", "--location", location)
	if code != exitOK || !strings.Contains(out, "newest whole metadata file under file://"+location+": 0") ||
		!strings.Contains(out, "registered lake.orders: file://"+location+"/metadata/") {
		t.Fatalf("register --location: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "its dead-letter table lake.orders_dlq is not in this catalog: register it too (floe register --table lake.orders_dlq --location ..., with this run's --catalog;") || !strings.Contains(out, dlqLocation) {
		t.Errorf("register did not name the missing dead-letter table and its location:\n%s", out)
	}
	// The audit it advises is of the catalog given on the command line,
	// not the one floe audit finds without it (from a new-user run).
	if !strings.Contains(out, "check it with: floe audit --table lake.orders, with this run's --catalog\n") {
		t.Errorf("register did not say that its audit needs this run's --catalog:\n%s", out)
	}
	// Until the dead-letter table is registered, its dead letter is
	// missing.
	if code, out, errs := floe(t, append([]string{"audit", "--table", "lake.orders"}, fresh...)...); code != exitFindings {
		t.Errorf("audit with the dead-letter table not registered: exit %d, want 1\n%s\n%s", code, out, errs)
	}
	// A dead-letter table has no ledger to audit: its data table's audit
	// checks it (from a user's recovery run: the hint was refused).
	if out := mustFloe(t, append([]string{"register", "--table", "lake.orders_dlq", "--location", dlqLocation}, fresh...)...); !strings.Contains(out, "check it with its data table: floe audit --table lake.orders --deep, with this run's --catalog") {
		t.Errorf("register of the dead-letter table:\n%s", out)
	}

	registerAudit(t, st.Brokers, "lake.orders", fresh...)
	if out := mustFloe(t, append([]string{"status", "--table", "lake.orders", "--brokers", brokers}, fresh...)...); !strings.Contains(out, "orders") {
		t.Errorf("status after registering: %s", out)
	}
	produceRound(t, st.Brokers, "orders", 3, 30, map[int32]int64{})
	if out := sink(fresh); !strings.Contains(out, "30 rows") {
		t.Errorf("the sink after registering should add only the 30 new records:\n%s", out)
	}
	registerAudit(t, st.Brokers, "lake.orders", fresh...)

	// Run again with the file the catalog has (a recovery script's rerun):
	// nothing to do, exit 0.
	registered := openTable(t, catalog.Config{Catalog: fresh[1], Existing: true}, "lake.orders").Iceberg().MetadataLocation()
	if code, out, errs := register("--table", "lake.orders", "--metadata-location", registered); code != exitOK || !strings.Contains(out, "lake.orders is already registered from this metadata file: nothing to do") ||
		strings.Contains(out, "registered lake.orders:") {
		t.Errorf("register again from the catalog's own file: exit %d, want 0\n%s%s", code, out, errs)
	}
	older, err := filepath.Glob(filepath.Join(location, "metadata", "00000-*.metadata.json"))
	if err != nil || len(older) != 1 {
		t.Fatalf("the table's first metadata file: %v %v", older, err)
	}
	// Refused, each with its fix, writing nothing.
	notMeta := filepath.Join(location, "metadata", "99999-not-metadata.metadata.json")
	if err := os.WriteFile(notMeta, []byte(`{"hello": "world"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "copied")
	if err := os.CopyFS(copied, os.DirFS(location)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(copied, "metadata", filepath.Base(notMeta))); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"already registered", []string{"--table", "lake.orders", "--metadata-location", older[0]},
			[]string{"table lake.orders is already in the catalog, at metadata file file://" + location, "floe drop --table lake.orders --keep-files --yes"}},
		{"the dead-letter table's folder under its data table's name", []string{"--table", "lake.orders", "--location", dlqLocation},
			[]string{"is that of the dead-letter table of lake.orders (folder orders_dlq), not of lake.orders itself", "floe register --table lake.orders_dlq"}},
		{"a missing file", []string{"--table", "lake.gone", "--metadata-location", filepath.Join(location, "metadata", "00001-nope.metadata.json")},
			[]string{"00001-nope.metadata.json", "check --metadata-location"}},
		{"no metadata there", []string{"--table", "lake.gone", "--location", t.TempDir()},
			[]string{"no Iceberg table metadata file in file://", "check --location"}},
		{"not table metadata", []string{"--table", "lake.gone", "--location", location},
			[]string{"99999-not-metadata.metadata.json", "not Iceberg table metadata"}},
		{"a copy of the table elsewhere", []string{"--table", "lake.copy", "--location", copied},
			[]string{"is not in the metadata folder of the table location it records, file://" + location, "rewrite_table_path"}},
		{"a location another table has", []string{"--table", "lake.again", "--metadata-location", registered},
			[]string{"is the location of this catalog's table lake.orders"}},
		{"both flags", []string{"--table", "lake.gone", "--location", location, "--metadata-location", notMeta},
			[]string{"give one"}},
		{"neither flag", []string{"--table", "lake.gone"}, []string{"missing --metadata-location FILE"}},
	} {
		code, out, errs := register(c.args...)
		for _, w := range c.want {
			if code != exitError || !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, stderr %q; want exit 2 and %q\nstdout: %s", c.name, code, errs, w, out)
			}
		}
	}
	for _, name := range []string{"lake.gone", "lake.copy", "lake.again"} {
		if code, _, _ := floe(t, append([]string{"status", "--table", name}, fresh...)...); code != exitError {
			t.Errorf("a refused registration left %s in the catalog", name)
		}
	}
}

// TestRegisterOlderMetadataWarns: --metadata-location of a metadata file
// older than the newest beside it registers the table as it was then, and
// says so; a sink then re-reads the later records from the log, each once.
func TestRegisterOlderMetadataWarns(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end", "--partitions", "0"}, loc...)...)
	first := openTable(t, st.Catalog(), "lake.orders").Iceberg().MetadataLocation()
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)

	ledger, err := openTable(t, st.Catalog(), "lake.orders").Ledger()
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	for p := range int32(3) {
		want[p] = mapping.Cover(ledger.Ranges(mapping.TopicPartition{Topic: "orders", Partition: p})).Next
	}

	fresh := []string{"--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", st.Catalog().Warehouse}
	code, out, errs := floe(t, append([]string{"register", "--table", "lake.orders", "--metadata-location", strings.TrimPrefix(first, "file://")}, fresh...)...)
	if code != exitOK || !strings.Contains(out, "registered lake.orders: "+first) || !strings.Contains(errs, "a newer metadata file is beside the one registered") {
		t.Fatalf("register of an older metadata file: exit %d\n%s\n%s", code, out, errs)
	}
	if out := mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, fresh...)...); !strings.Contains(out, fmt.Sprintf("%d rows", want[1]+want[2])) {
		t.Errorf("the sink after registering the older file should sink partitions 1 and 2 again, %d records:\n%s", want[1]+want[2], out)
	}
	checkTable(t, catalog.Config{Catalog: fresh[1], Existing: true}, "lake.orders", "orders", want)
}

// TestRegisterSkipsUncommittedNewest (from a review): a commit writes its
// metadata file of version v+1 and the catalog's update fails, so the
// table stays at version v; floe maintain --remove-orphans then deletes
// that commit's data file, manifest list and manifest, which no version of
// the table references, but keeps its metadata file. After the catalog is
// lost, register --location must skip that file, whose current snapshot
// cannot be read, saying which file it skipped and why, and register
// version v, which audits whole at the file level; --metadata-location of
// the skipped file is refused, naming its missing manifest list.
func TestRegisterSkipsUncommittedNewest(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	sink := func(p string) {
		mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end", "--partitions", p}, loc...)...)
	}
	db, err := sql.Open("sqlite", st.Catalog().Catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sink("0")
	state := openTable(t, st.Catalog(), "lake.orders").Iceberg().MetadataLocation()
	sink("1")
	uncommitted := openTable(t, st.Catalog(), "lake.orders").Iceberg()
	// The catalog's update of that commit never happened.
	if _, err := db.ExecContext(t.Context(), "UPDATE iceberg_tables SET metadata_location = ? WHERE table_name = 'orders'", state); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	mustFloe(t, append([]string{"maintain", "--table", "lake.orders", "--remove-orphans", "--orphan-min-age", "10ms"}, loc...)...)
	manifestList := uncommitted.CurrentSnapshot().ManifestList
	if _, err := os.Stat(strings.TrimPrefix(manifestList, "file://")); !os.IsNotExist(err) {
		t.Fatalf("setup: maintain should have deleted the uncommitted manifest list %s: %v", manifestList, err)
	}

	fresh := []string{"--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", st.Catalog().Warehouse}
	location := filepath.Join(st.Catalog().Warehouse, "lake.db", "orders")
	code, out, errs := floe(t, append([]string{"register", "--table", "lake.orders", "--metadata-location", uncommitted.MetadataLocation()}, fresh...)...)
	if code != exitError || !strings.Contains(errs, "is not a whole table") || !strings.Contains(errs, "manifest list "+manifestList) {
		t.Errorf("register --metadata-location of the uncommitted file: exit %d, want 2 naming its missing manifest list %s\n%s%s", code, manifestList, out, errs)
	}
	code, out, errs = floe(t, append([]string{"register", "--table", "lake.orders", "--location", location}, fresh...)...)
	if code != exitOK || !strings.Contains(out, "newest whole metadata file under file://"+location+": "+filepath.Base(state)) ||
		!strings.Contains(errs, "skipped a metadata file, not a whole table") || !strings.Contains(errs, filepath.Base(uncommitted.MetadataLocation())) ||
		!strings.Contains(errs, filepath.Base(manifestList)) {
		t.Fatalf("register --location: exit %d, want %s registered and %s named as skipped for its missing manifest list\n%s%s",
			code, filepath.Base(state), filepath.Base(uncommitted.MetadataLocation()), out, errs)
	}
	if got := openTable(t, catalog.Config{Catalog: fresh[1], Existing: true}, "lake.orders").Iceberg().MetadataLocation(); got != state {
		t.Errorf("registered %s, want the table's state %s", filepath.Base(got), filepath.Base(state))
	}
	if code, out, errs := floe(t, append([]string{"audit", "--table", "lake.orders", "--deep"}, fresh...)...); code != exitOK {
		t.Errorf("audit --deep of the registered table: exit %d\n%s%s", code, out, errs)
	}
}

// TestRegisterRefusesTiedNewest (from a review): two writers of one table
// race for version v+1; A's commit wins, B's loses the catalog's swap
// after writing its metadata file of version v+1, later than A's, and B
// stops before removing it. After the catalog is lost, register --location
// must not guess (the latest last-updated-ms is B's, the loser's): it
// refuses, naming both files with their current snapshot ids and the
// ranges their last commits sank, and asks for --metadata-location, which
// then registers A's. Once B's manifest list is gone (maintenance removes
// it as unreferenced), B's file is not a whole table, so there is no tie:
// --location takes A's and names B's as skipped.
func TestRegisterRefusesTiedNewest(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	sink := func(p string) {
		mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "--table", "lake.orders", "--stop-at-end", "--partitions", p}, loc...)...)
	}
	db, err := sql.Open("sqlite", st.Catalog().Catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	setRow := func(meta string) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), "UPDATE iceberg_tables SET metadata_location = ? WHERE table_name = 'orders'", meta); err != nil {
			t.Fatal(err)
		}
	}
	sink("0")
	base := openTable(t, st.Catalog(), "lake.orders").Iceberg().MetadataLocation()
	sink("1") // A: wins version v+1
	winner := openTable(t, st.Catalog(), "lake.orders").Iceberg()
	time.Sleep(20 * time.Millisecond)
	// B staged its commit from version v, as A did, and wrote its file
	// after A's: the catalog's swap refuses it (simulated by pointing the
	// row back at v for B's commit, then at A's file, the race's outcome).
	setRow(base)
	sink("2") // B: loses version v+1
	loser := openTable(t, st.Catalog(), "lake.orders").Iceberg()
	setRow(winner.MetadataLocation())
	if v := func(f string) string { b := filepath.Base(f); return b[:strings.Index(b, "-")] }; v(winner.MetadataLocation()) != v(loser.MetadataLocation()) {
		t.Fatalf("setup: winner %s and loser %s should share a version", winner.MetadataLocation(), loser.MetadataLocation())
	}

	// The catalog is lost.
	fresh := func() []string {
		return []string{"--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", st.Catalog().Warehouse}
	}
	lost := fresh()
	location := filepath.Join(st.Catalog().Warehouse, "lake.db", "orders")
	code, out, errs := floe(t, append([]string{"register", "--table", "lake.orders", "--location", location}, lost...)...)
	for _, want := range []string{"2 whole metadata files share the newest version",
		fmt.Sprint(winner.CurrentSnapshot().SnapshotID), filepath.Base(winner.MetadataLocation()) + ": orders/1 [0, ",
		fmt.Sprint(loser.CurrentSnapshot().SnapshotID), filepath.Base(loser.MetadataLocation()) + ": orders/2 [0, ",
		"--metadata-location FILE"} {
		if code != exitError || !strings.Contains(errs, want) {
			t.Errorf("register --location with two whole files of the newest version: exit %d, want 2 and %q in\n%s%s", code, want, out, errs)
		}
	}
	if code, _, _ := floe(t, append([]string{"status", "--table", "lake.orders"}, lost...)...); code != exitError {
		t.Errorf("the refused registration left lake.orders in the catalog")
	}
	code, out, errs = floe(t, append([]string{"register", "--table", "lake.orders", "--metadata-location", winner.MetadataLocation()}, lost...)...)
	if code != exitOK || strings.Contains(errs, "a newer metadata file") {
		t.Errorf("register --metadata-location of the winner: exit %d, want 0 and no newer file named\n%s%s", code, out, errs)
	}

	// Maintenance removes the loser's manifest list: no tie.
	if err := os.Remove(strings.TrimPrefix(loser.CurrentSnapshot().ManifestList, "file://")); err != nil {
		t.Fatal(err)
	}
	code, out, errs = floe(t, append([]string{"register", "--table", "lake.orders", "--location", location}, fresh()...)...)
	if code != exitOK || !strings.Contains(out, "newest whole metadata file under file://"+location+": "+filepath.Base(winner.MetadataLocation())) ||
		!strings.Contains(errs, "skipped a metadata file, not a whole table") || !strings.Contains(errs, filepath.Base(loser.MetadataLocation())) {
		t.Errorf("register --location with the loser's manifest list gone: exit %d, want %s registered and %s skipped\n%s%s",
			code, filepath.Base(winner.MetadataLocation()), filepath.Base(loser.MetadataLocation()), out, errs)
	}
}

// TestRegisterMetadataPathElsewhere: --location refuses a table whose
// newest metadata file sets write.metadata.path to another folder (its
// later files are there, among other tables' perhaps), saying to give
// --metadata-location; a write.metadata.path naming the table's own
// metadata folder is no refusal.
func TestRegisterMetadataPathElsewhere(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	newest := strings.TrimPrefix(openTable(t, st.Catalog(), "lake.orders").Iceberg().MetadataLocation(), "file://")
	dir, location := filepath.Dir(newest), filepath.Dir(filepath.Dir(newest))
	version, _, _ := strings.Cut(filepath.Base(newest), "-")
	v, err := strconv.Atoi(version)
	if err != nil {
		t.Fatal(err)
	}
	// next writes a copy of the newest file as the next version, setting
	// write.metadata.path to metaPath.
	next := func(metaPath string) string {
		t.Helper()
		b, err := os.ReadFile(newest)
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		meta["properties"].(map[string]any)["write.metadata.path"] = metaPath
		if b, err = json.Marshal(meta); err != nil {
			t.Fatal(err)
		}
		v++
		name := filepath.Join(dir, fmt.Sprintf("%05d-0b7e8d2c-1f3a-4c55-9a51-1f2e3d4c5b%02d.metadata.json", v, v))
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	register := func() (int, string, string) {
		fresh := []string{"--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", st.Catalog().Warehouse}
		return floe(t, append([]string{"register", "--table", "lake.orders", "--location", location}, fresh...)...)
	}
	elsewhere := t.TempDir()
	setter := next(elsewhere)
	code, out, errs := register()
	if code != exitError || !strings.Contains(errs, filepath.Base(setter)+" sets write.metadata.path to "+elsewhere) || !strings.Contains(errs, "--metadata-location FILE") {
		t.Errorf("register --location of a table whose metadata is elsewhere: exit %d, want 2 naming %s and --metadata-location\n%s%s", code, elsewhere, out, errs)
	}
	own := next("file://" + dir + "/")
	if code, out, errs := register(); code != exitOK || !strings.Contains(out, filepath.Base(own)) {
		t.Errorf("register --location of a table whose write.metadata.path is its metadata folder: exit %d, want %s registered\n%s%s", code, filepath.Base(own), out, errs)
	}
}

// TestRegisterRefusesViewName: in a SQL catalog whose row of the name is
// a view's (iceberg_type VIEW), the refusal says a view has the name, not
// that the table is already in the catalog, and writes nothing.
func TestRegisterRefusesViewName(t *testing.T) {
	st, loc := sinkStack(t)
	mustFloe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "orders", "--table", "lake.orders", "--stop-at-end"}, loc...)...)
	mustFloe(t, append([]string{"drop", "--table", "lake.orders", "--keep-files", "--yes"}, loc...)...)
	db, err := sql.Open("sqlite", st.Catalog().Catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const view = "file:///views/orders/metadata/00001-x.metadata.json"
	if _, err := db.ExecContext(t.Context(), "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, iceberg_type) VALUES ('floe', 'lake', 'orders', ?, 'VIEW')", view); err != nil {
		t.Fatal(err)
	}
	location := filepath.Join(st.Catalog().Warehouse, "lake.db", "orders")
	code, out, errs := floe(t, append([]string{"register", "--table", "lake.orders", "--location", location}, loc...)...)
	if code != exitError || !strings.Contains(errs, "lake.orders is the name of a view in the catalog, not of a table") || strings.Contains(errs, "floe drop") {
		t.Errorf("register under a view's name: exit %d, want 2 saying a view has the name\n%s%s", code, out, errs)
	}
	var got string
	if err := db.QueryRowContext(t.Context(), "SELECT metadata_location FROM iceberg_tables WHERE table_name = 'orders'").Scan(&got); err != nil || got != view {
		t.Errorf("the view's row after the refusal: %q, %v; want it unchanged", got, err)
	}
}

// TestRegisterPostgresOnS3: the production layout (a PostgreSQL catalog,
// the tables on S3) loses its catalog database: the table is registered
// from its s3:// location in a new database, whose catalog tables floe
// creates; the audit finds it complete and a sink resumes it exactly. A
// bucket that does not exist is reported as such.
func TestRegisterPostgresOnS3(t *testing.T) {
	e := newPGEnv(t)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 2, 200, count)
	mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end", "--flush-records", "70")...)

	db, err := sql.Open("pg", e.pg.URI) // bun's pgdriver, registered by package catalog
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE recovered"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.pg.URI)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/recovered"
	e.catalog = u.String()

	location := "s3://lake/warehouse/lake.db/orders"
	reg := []string{"register", "--table", "lake.orders", "--catalog", e.catalog}
	out := mustFloe(t, append(reg, "--location", location)...)
	if !strings.Contains(out, "registered lake.orders: "+location+"/metadata/") {
		t.Errorf("register --location %s:\n%s", location, out)
	}
	registerAudit(t, e.brokers, "lake.orders", "--catalog", e.catalog)
	produceRound(t, e.brokers, "orders", 2, 40, count)
	if out := mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...); !strings.Contains(out, "40 rows") {
		t.Errorf("the sink after registering should add only the 40 new records:\n%s", out)
	}
	checkTable(t, e.catalogConfig(), "lake.orders", "orders", count)

	code, _, errs := floe(t, append(reg, "--location", "s3://no-such-bucket/warehouse/lake.db/orders")...)
	if code != exitError || !strings.Contains(errs, "bucket does not exist") {
		t.Errorf("register from a bucket that does not exist: exit %d, stderr %q", code, errs)
	}
	// The newest file is the catalog's: run again, nothing to do.
	code, out, errs = floe(t, append(reg, "--location", location)...)
	if code != exitOK || !strings.Contains(out, "already registered from this metadata file") {
		t.Errorf("register of a registered table from its own file: exit %d\n%s%s", code, out, errs)
	}

	// The whole warehouse, into a third database: found by listing the
	// bucket's namespace and table folders.
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE recovered_all"); err != nil {
		t.Fatal(err)
	}
	u.Path = "/recovered_all"
	out = mustFloe(t, "register", "--all", "--location", "s3://lake/warehouse", "--catalog", u.String())
	if !strings.Contains(out, "registered lake.orders: "+location+"/metadata/") {
		t.Errorf("register --all --location s3://lake/warehouse:\n%s", out)
	}
	registerAudit(t, e.brokers, "lake.orders", "--catalog", u.String())
}

// TestRegisterGlue: a table dropped from Glue (moto's) with its files kept
// is registered again through Glue's own registration, and the audit
// finds it complete; the same table is then registered in a SQLite
// catalog too, as a move between catalogs begins.
func TestRegisterGlue(t *testing.T) {
	e := newGlueEnv(t, nil)
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 2, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 2, 100, count)
	mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...)
	mustFloe(t, "drop", "--table", "lake.orders", "--keep-files", "--yes", "--catalog", "glue")

	location := "s3://lake/warehouse/lake.db/orders"
	if out := mustFloe(t, "register", "--table", "lake.orders", "--location", location, "--catalog", "glue"); !strings.Contains(out, "registered lake.orders: "+location) {
		t.Errorf("register in Glue:\n%s", out)
	}
	registerAudit(t, e.brokers, "lake.orders", "--catalog", "glue")
	checkTable(t, e.catalogConfig(), "lake.orders", "orders", count)

	sqlite := filepath.Join(t.TempDir(), "catalog.db")
	mustFloe(t, "register", "--table", "lake.orders", "--location", location, "--catalog", sqlite, "--warehouse", e.warehouse())
	registerAudit(t, e.brokers, "lake.orders", "--catalog", sqlite)
}

// TestRegisterUsageListsFlags: the usage line names every flag of floe
// register except the catalog flags every table command shares.
func TestRegisterUsageListsFlags(t *testing.T) {
	cmd := newRegisterCmd()
	var shared tableFlags
	sharedSet := pflag.NewFlagSet("shared", pflag.ContinueOnError)
	shared.register(sharedSet)
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if sharedSet.Lookup(fl.Name) == nil && !strings.Contains(cmd.Use, "--"+fl.Name) {
			t.Errorf("usage %q lacks --%s", cmd.Use, fl.Name)
		}
	})
}

// TestRegisterRefusedCreatesNoCatalog: floe register into a SQLite
// catalog that does not exist yet creates it only for a registration that
// passes its checks: each refusal leaves no file or folder behind (each
// left an empty catalog file), and the registration that follows creates
// it.
func TestRegisterRefusedCreatesNoCatalog(t *testing.T) {
	st, loc := sinkStack(t)
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "orders", Partition: 0, Value: []byte("not json")}}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, append([]string{"sink", "-b", strings.Join(st.Brokers, ","), "-t", "orders", "--table", "lake.orders", "--value", "json", "--stop-at-end"}, loc...)...)
	location := filepath.Join(st.Catalog().Warehouse, "lake.db", "orders")
	notMeta := filepath.Join(t.TempDir(), "00001-not-metadata.metadata.json")
	if err := os.WriteFile(notMeta, []byte(`{"hello": "world"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(t.TempDir(), "orders")
	if err := os.CopyFS(copied, os.DirFS(location)); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "new")
	newCatalog := []string{"--catalog", filepath.Join(dir, "catalog.db"), "--warehouse", filepath.Join(dir, "warehouse")}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no metadata there", []string{"--table", "lake.gone", "--location", t.TempDir()}, "no Iceberg table metadata file"},
		{"a missing file", []string{"--table", "lake.gone", "--metadata-location", filepath.Join(location, "metadata", "00099-nope.metadata.json")}, "check --metadata-location"},
		{"not table metadata", []string{"--table", "lake.gone", "--metadata-location", notMeta}, "not Iceberg table metadata"},
		{"a copy of the table elsewhere", []string{"--table", "lake.orders", "--location", copied}, "the table was copied or moved"},
		{"the dead-letter table's folder under its data table's name", []string{"--table", "lake.orders", "--location", location + "_dlq"}, "is that of the dead-letter table of lake.orders"},
	} {
		if code, out, errs := floe(t, slices.Concat([]string{"register"}, c.args, newCatalog)...); code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, want 2 and %q\n%s%s", c.name, code, c.want, out, errs)
		}
		if entries, err := os.ReadDir(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the refused registration left %s behind: %v %v", c.name, dir, entries, err)
			os.RemoveAll(dir)
		}
	}
	mustFloe(t, slices.Concat([]string{"register", "--table", "lake.orders", "--location", location}, newCatalog)...)
	if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err != nil {
		t.Fatalf("the registration did not create the catalog: %v", err)
	}
	mustFloe(t, slices.Concat([]string{"status", "--table", "lake.orders"}, newCatalog)...)
}

// TestRegisterAllAfterLostCatalog: a warehouse of several tables (two
// topics sunk into lake.{topic}, each with its dead-letter table, one
// holding a dead letter, and a table of another namespace) whose SQLite catalog is lost is registered whole
// by floe register --all; each audits complete, a rerun has nothing to do,
// and a table the catalog has from another metadata file is named as not
// registered while the others are (exit 2).
func TestRegisterAllAfterLostCatalog(t *testing.T) {
	st, loc := sinkStack(t)
	brokers := strings.Join(st.Brokers, ",")
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "orders", Partition: 0, Value: []byte("not json")}}); err != nil {
		t.Fatal(err)
	}
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "payments", 1, nil); err != nil {
		t.Fatal(err)
	}
	produceRound(t, st.Brokers, "payments", 1, 50, map[int32]int64{})
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "orders", "-t", "payments", "--table", "lake.{topic}", "--value", "json", "--stop-at-end"}, loc...)...)
	mustFloe(t, append([]string{"sink", "-b", brokers, "-t", "payments", "--table", "other.payments_copy", "--stop-at-end"}, loc...)...)
	warehouse := st.Catalog().Warehouse

	fresh := []string{"--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", warehouse}
	out := mustFloe(t, append([]string{"register", "--all", "--location", warehouse}, fresh...)...)
	for _, name := range []string{"lake.orders", "lake.orders_dlq", "lake.payments", "lake.payments_dlq", "other.payments_copy"} {
		if !strings.Contains(out, "registered "+name+": file://") {
			t.Errorf("register --all did not register %s:\n%s", name, out)
		}
	}
	if strings.Contains(out, "is not in this catalog") {
		t.Errorf("register --all named a dead-letter table missing that it registered:\n%s", out)
	}
	for _, name := range []string{"lake.orders", "lake.payments", "other.payments_copy"} {
		registerAudit(t, st.Brokers, name, fresh...)
	}
	// A rerun (a recovery script's): nothing to do, exit 0.
	if code, out, errs := floe(t, append([]string{"register", "--all", "--location", warehouse}, fresh...)...); code != exitOK ||
		strings.Count(out, "is already registered from this metadata file: nothing to do") != 5 || strings.Contains(out, "registered lake.") {
		t.Errorf("register --all again: exit %d\n%s%s", code, out, errs)
	}

	// Another catalog has lake.payments from its first metadata file: the
	// others are registered, lake.payments is named, exit 2.
	other := []string{"--catalog", filepath.Join(t.TempDir(), "catalog.db"), "--warehouse", warehouse}
	first, err := filepath.Glob(filepath.Join(warehouse, "lake.db", "payments", "metadata", "00000-*.metadata.json"))
	if err != nil || len(first) != 1 {
		t.Fatalf("lake.payments' first metadata file: %v %v", first, err)
	}
	mustFloe(t, append([]string{"register", "--table", "lake.payments", "--metadata-location", first[0]}, other...)...)
	code, out, errs := floe(t, append([]string{"register", "--all", "--location", warehouse}, other...)...)
	if code != exitError || !strings.Contains(errs, "lake.payments not registered: table lake.payments is already in the catalog") ||
		!strings.Contains(errs, "1 of 5 tables under file://"+warehouse+" not registered (lake.payments)") || !strings.Contains(out, "registered other.payments_copy") {
		t.Errorf("register --all beside a table registered from another file: exit %d, want 2\n%s\n%s", code, out, errs)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--all"}, "--all needs --location WAREHOUSE"},
		{[]string{"--all", "--location", warehouse, "--table", "lake.orders"}, "leave out --table and --metadata-location"},
		{[]string{"--all", "--location", t.TempDir()}, "no table folder under file://"},
	} {
		if code, out, errs := floe(t, append(append([]string{"register"}, c.args...), fresh...)...); code != exitError || !strings.Contains(errs, c.want) {
			t.Errorf("register %v: exit %d, stderr %q; want exit 2 and %q\n%s", c.args, code, errs, c.want, out)
		}
	}
}
