package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
)

// TestS3Servers runs floe's whole story on each real S3 server users run
// (testenv.S3Servers: versitygw and MinIO), each in its own process over
// TCP, with a SQLite catalog: sink, resume, the audit at every level,
// lookups, replay, status and maintenance (serverStory).
func TestS3Servers(t *testing.T) {
	for _, f := range testenv.S3Servers() {
		t.Run(f.Name, func(t *testing.T) {
			serverStory(t, newS3EnvOn(t, f.Start))
		})
	}
}

// TestGlueCatalog runs the same story with the AWS Glue catalog (moto's
// Glue), its tables on moto's own S3 and on versitygw: Glue keeps the
// tables' metadata pointers, the S3 server their files.
func TestGlueCatalog(t *testing.T) {
	for _, c := range []struct {
		name string
		s3   func(testing.TB) *testenv.S3Server
	}{
		{"s3 on moto", nil},
		{"s3 on versitygw", testenv.VersityGW},
	} {
		t.Run(c.name, func(t *testing.T) {
			serverStory(t, newGlueEnv(t, c.s3))
		})
	}
}

// newGlueEnv starts moto's server for Glue, and the S3 server s3 starts
// (nil: moto serves S3 too), with the AWS standard environment pointing at
// them, as a user of Glue with an S3-compatible store would configure it.
func newGlueEnv(t *testing.T, s3 func(testing.TB) *testenv.S3Server) *s3Env {
	t.Helper()
	moto := testenv.Moto(t)
	var e *s3Env
	if s3 == nil {
		e = newS3EnvOn(t, func(testing.TB) *testenv.S3Server { return moto })
	} else {
		e = newS3EnvOn(t, s3)
	}
	// moto accepts any credentials: the S3 server's are signed for Glue
	// too.
	t.Setenv("AWS_ENDPOINT_URL_GLUE", moto.Endpoint)
	e.catalog = "glue"
	return e
}

// serverStory is one server's parity story, through the CLI as a user
// runs it:
//   - sink a topic of three partitions in several commits, then resume
//     after more records arrive: the ledger and the rows are exact;
//   - the table's data and metadata are objects of the bucket;
//   - floe audit at every level (ledger, files, rows, broker, content)
//     finds nothing;
//   - floe where finds the data file holding an offset, floe files lists
//     it among the snapshot's, floe as-of gives the exact table at a
//     position, floe status no lag;
//   - floe replay rebuilds the table on the same server, auditable too;
//   - floe maintain expires every snapshot but the last, archiving the
//     ledger first, and deletes an orphan data file: the audit, where and a
//     resume still see the whole ledger.
func serverStory(t *testing.T, e *s3Env) {
	start := time.Now()
	step := func(what string) {
		t.Logf("%s: %s done at %s", e.s3.Kind, what, time.Since(start).Round(time.Millisecond))
	}
	brokers := strings.Join(e.brokers, ",")
	if err := localstack.CreateTopic(t.Context(), e.brokers, "orders", 3, nil); err != nil {
		t.Fatal(err)
	}
	count := map[int32]int64{}
	produceRound(t, e.brokers, "orders", 3, 600, count)
	mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end", "--flush-records", "250")...)
	produceRound(t, e.brokers, "orders", 3, 90, count)
	if out := mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...); !strings.Contains(out, "90 rows") {
		t.Errorf("resume should add the 90 new records:\n%s", out)
	}
	ledger := checkTable(t, e.catalogConfig(), "lake.orders", "orders", count)
	if len(ledger.Commits) < 3 {
		t.Errorf("%d commits, want at least 3 (600 records by 250, then 90)", len(ledger.Commits))
	}
	step("sink and resume")

	// The files are the server's objects: bucket lake, prefix
	// warehouse/lake.db/orders.
	tbl := openTable(t, e.catalogConfig(), "lake.orders")
	if loc := tbl.Iceberg().MetadataLocation(); !strings.HasPrefix(loc, "s3://lake/warehouse/lake.db/orders/metadata/") {
		t.Errorf("metadata location %s", loc)
	}
	if listing := e.list(t, "warehouse/lake.db/orders/data/"); !strings.Contains(listing, ".parquet") {
		t.Errorf("no Parquet object listed under the table's data prefix:\n%s", listing)
	}

	loc := []string{"--catalog", e.catalog, "--warehouse", e.warehouse()}
	audit := func(table string, want map[int32]int64) {
		t.Helper()
		out := mustFloe(t, append([]string{"audit", "--table", table, "--deep", "--brokers", brokers, "--verify-content", "--json"}, loc...)...)
		doc := decodeAudit(t, out)
		if !doc.Complete || len(doc.Findings) > 0 {
			t.Errorf("audit of %s: complete %v, findings %+v", table, doc.Complete, doc.Findings)
		}
		if got := strings.Join(doc.Levels, ","); got != "ledger,files,rows,broker,content" {
			t.Errorf("audit of %s ran levels %s, want all five", table, got)
		}
		for _, p := range doc.Partitions {
			if p.Rows == nil || *p.Rows != want[p.Partition] || p.Content == nil || p.Content.Verified != want[p.Partition] ||
				p.Lag == nil || *p.Lag != 0 {
				t.Errorf("audit of %s, partition %d: rows %v, content %+v, lag %v; want %d rows, all verified, no lag",
					table, p.Partition, p.Rows, p.Content, p.Lag, want[p.Partition])
			}
		}
	}
	audit("lake.orders", count)
	step("audit")

	// The commit that consumed orders/1 offset 5.
	var holder int64
	for _, c := range ledger.Commits {
		for _, r := range c.Ranges {
			if r.Partition == 1 && r.Low <= 5 && 5 < r.High {
				holder = c.SnapshotID
			}
		}
	}
	where := func() lookup.WhereResult {
		t.Helper()
		out := mustFloe(t, append([]string{"where", "--table", "lake.orders", "--topic", "orders", "--partition", "1", "--offset", "5", "--json"}, loc...)...)
		var w lookup.WhereResult
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatalf("floe where --json: %v\n%s", err, out)
		}
		if w.Status != "row" || w.SnapshotID == nil || *w.SnapshotID != holder ||
			!strings.HasPrefix(w.File, "s3://lake/warehouse/lake.db/orders/data/") {
			t.Errorf("floe where orders/1@5: %+v; want a row of snapshot %d in a data object", w, holder)
		}
		return w
	}
	before := where()

	out := mustFloe(t, append([]string{"files", "--table", "lake.orders", "--json"}, loc...)...)
	var files lookup.FilesResult
	if err := json.Unmarshal([]byte(out), &files); err != nil {
		t.Fatalf("floe files --json: %v\n%s", err, out)
	}
	total := int64(0)
	for _, n := range count {
		total += n
	}
	holds := false
	for _, f := range files.Files {
		holds = holds || f.Path == before.File
	}
	if files.Records != total || !holds {
		t.Errorf("floe files: %d records in %d files, the one where named among them: %v; want %d records",
			files.Records, len(files.Files), holds, total)
	}

	rows := filepath.Join(t.TempDir(), "asof.jsonl")
	mustFloe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "orders/0=100,orders/1=50,orders/2=0", "--rows", "--output", rows}, loc...)...)
	if b, err := os.ReadFile(rows); err != nil || strings.Count(string(b), "\n") != 150 {
		t.Errorf("floe as-of orders/0=100,1=50,2=0 wrote %d rows (%v), want 150", strings.Count(string(b), "\n"), err)
	}

	js := mustFloe(t, append([]string{"status", "--brokers", brokers, "--table", "lake.orders", "--format", "json"}, loc...)...)
	var st lookup.TableStatus
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Partitions {
		if p.Lag == nil || *p.Lag != 0 || p.EndOffset == nil || *p.EndOffset != count[p.Partition] {
			t.Errorf("status %+v, want lag 0 at end offset %d", p, count[p.Partition])
		}
	}
	step("lookups")

	mustFloe(t, append([]string{"replay", "--brokers", brokers, "--topic", "orders", "--table", "lake.orders_rebuilt"}, loc...)...)
	checkTable(t, e.catalogConfig(), "lake.orders_rebuilt", "orders", count)
	audit("lake.orders_rebuilt", count)
	step("replay")

	// An orphan: a data object no snapshot references, as a crashed
	// writer leaves one.
	orphan := "warehouse/lake.db/orders/data/orphan-of-a-crashed-writer.parquet"
	e.put(t, orphan, []byte("PAR1 not committed"))
	time.Sleep(10 * time.Millisecond)
	out = mustFloe(t, append([]string{"maintain", "--table", "lake.orders", "--expire-older-than", "0", "--retain-last", "1",
		"--remove-orphans", "--orphan-min-age", "1ms"}, loc...)...)
	if !strings.Contains(out, "orphan data files deleted: 1 ") || !strings.Contains(out, "s3://lake/"+orphan) {
		t.Errorf("maintain did not delete the orphan %s:\n%s", orphan, out)
	}
	if !strings.Contains(out, "ledger archive: ") || !strings.Contains(out, "\n  s3://lake/warehouse/lake.db/orders/metadata/floe-ledger/") {
		t.Errorf("maintain did not archive the ledger on the server:\n%s", out)
	}
	if listing := e.list(t, orphan); strings.Contains(listing, "<Key>") {
		t.Errorf("the orphan is still listed:\n%s", listing)
	}
	tbl = openTable(t, e.catalogConfig(), "lake.orders")
	if n := len(tbl.Iceberg().Metadata().Snapshots()); n != 1 {
		t.Errorf("%d snapshots after expiry, want 1", n)
	}
	// The expired commits' ranges are read from the archive.
	checkTable(t, e.catalogConfig(), "lake.orders", "orders", count)
	audit("lake.orders", count)
	if after := where(); after.File != before.File {
		t.Errorf("floe where after expiry names %s, before %s", after.File, before.File)
	}
	produceRound(t, e.brokers, "orders", 3, 30, count)
	if out := mustFloe(t, e.sinkArgs("orders", "lake.orders", "--stop-at-end")...); !strings.Contains(out, "30 rows") {
		t.Errorf("resume after expiry should add the 30 new records:\n%s", out)
	}
	checkTable(t, e.catalogConfig(), "lake.orders", "orders", count)
	step("maintain and resume")
}

// list lists the bucket's objects under prefix (ListObjectsV2) and returns
// the response's XML.
func (e *s3Env) list(t *testing.T, prefix string) string {
	t.Helper()
	resp, err := e.s3.Do(t.Context(), "GET", "/"+e.bucket+"?list-type=2&prefix="+prefix, nil)
	if err != nil {
		t.Fatalf("list %s on %s: %v", prefix, e.s3.Kind, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("list %s on %s: %s %v\n%s", prefix, e.s3.Kind, resp.Status, err, b)
	}
	return string(b)
}

// put writes object key of the bucket.
func (e *s3Env) put(t *testing.T, key string, body []byte) {
	t.Helper()
	resp, err := e.s3.Do(t.Context(), "PUT", "/"+e.bucket+"/"+key, body)
	if err != nil {
		t.Fatalf("put %s on %s: %v", key, e.s3.Kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("put %s on %s: %s\n%s", key, e.s3.Kind, resp.Status, b)
	}
}
