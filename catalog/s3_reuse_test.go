package catalog_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestS3CommitsKeepResourcesFlat commits 300 small flushes (one data file
// each) to a table on each S3 server (testenv.S3Servers) and checks that
// the process's open file descriptors, goroutines and heap do not grow
// with the commits.
// iceberg-go opens the storage for every data file, commit and catalog
// load, and used to build a new AWS configuration (parsing AWS_CA_BUNDLE
// again), S3 client and HTTP transport each time; their idle connections
// kept them alive, so a sink committing every 200 ms reached thousands of
// descriptors and goroutines and a heap of 1 GB. The CA bundle is set so
// that every configuration built parses a certificate pool. It runs in the
// SDK's default (legacy) defaults mode and, on versitygw, in the standard
// mode, in which the SDK copies a buildable HTTP client's transport into
// every S3 client.
func TestS3CommitsKeepResourcesFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("commits 300 snapshots to S3, twice")
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("counting open file descriptors needs /proc/self/fd")
	}
	const caBundle = "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(caBundle); err != nil {
		t.Skipf("no CA bundle at %s", caBundle)
	}
	// The defaults mode is the SDK's side of the connection, so the
	// standard mode runs on the first server only: the servers differ in
	// how they keep connections, which the default (legacy) mode meets on
	// each.
	for i, f := range testenv.S3Servers() {
		modes := []string{"legacy", "standard"}
		if i > 0 {
			modes = modes[:1]
		}
		for _, mode := range modes {
			t.Run(f.Name+"/"+mode, func(t *testing.T) {
				t.Setenv("AWS_DEFAULTS_MODE", mode)
				t.Setenv("AWS_CA_BUNDLE", caBundle)
				commitsKeepResourcesFlat(t, f.Start)
			})
		}
	}
}

func commitsKeepResourcesFlat(t *testing.T, startServer func(testing.TB) *testenv.S3Server) {
	// Like AWS S3 and MinIO, and unlike versitygw by default, the server
	// keeps connections alive: idle connections are what kept every client
	// iceberg-go built alive.
	t.Setenv("VGW_KEEP_ALIVE", "true")
	s3 := startServer(t)
	s3.CreateBucket(t, "lake")
	dir := t.TempDir()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))

	cat, err := catalog.Open(t.Context(), catalog.Config{
		Catalog:   filepath.Join(dir, "catalog.db"),
		Warehouse: "s3://lake/warehouse",
		S3:        catalog.S3Config{Endpoint: s3.Endpoint, Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := snapshot.Open(t.Context(), cat, []string{"lake", "flat"}, snapshot.OpenOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}

	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	var at50, at300 usage
	start := time.Now()
	for i := range int64(300) {
		rb, err := mapping.NewRowBuilder(memory.DefaultAllocator, tbl.ArrowSchema())
		if err != nil {
			t.Fatal(err)
		}
		rb.Append(&kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Offset: i, Value: []byte("v"), Timestamp: time.UnixMilli(1_700_000_000_000 + i)})
		f := snapshot.Flush{
			Batches: map[mapping.TopicPartition][]arrow.RecordBatch{tp: {rb.NewBatch()}},
			Ranges:  []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: i, High: i + 1}, Records: 1}},
		}
		rb.Release()
		if _, err := tbl.Commit(t.Context(), f, snapshot.CommitOptions{Writer: "test"}); err != nil {
			t.Fatalf("commit %d: %v", i+1, err)
		}
		switch i + 1 {
		case 50:
			at50 = measure(t)
		case 300:
			at300 = measure(t)
		}
	}
	t.Logf("300 commits in %v", time.Since(start).Round(time.Millisecond))
	flat(t, "250 commits", at50, at300)

	// The readers: a reload from the catalog, an audit reading every data
	// file, and a maintenance run listing the data and metadata folders
	// for orphans.
	start = time.Now()
	for range 2 {
		if err := tbl.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		rep, err := audit.Run(t.Context(), tbl, audit.Options{Depth: audit.DepthRows})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Complete() {
			t.Fatalf("audit: %+v", rep.Findings)
		}
		if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{RemoveOrphans: true, DryRun: true}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("2 reloads, audits and orphan listings in %v", time.Since(start).Round(time.Millisecond))
	flat(t, "2 reloads, audits and orphan listings", at300, measure(t))
}

// usage is what the process holds: open file descriptors, goroutines and
// live heap after a garbage collection.
type usage struct {
	fds, goroutines int
	heap            uint64
}

func measure(t *testing.T) usage {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return usage{fds: len(fds), goroutines: runtime.NumGoroutine(), heap: ms.HeapAlloc}
}

// flat fails t when the usage grew from before to after by more than what
// a handful of connections and some metadata take.
func flat(t *testing.T, what string, before, after usage) {
	t.Helper()
	t.Logf("%s: %d -> %d fds, %d -> %d goroutines, heap %d -> %d MB", what,
		before.fds, after.fds, before.goroutines, after.goroutines, before.heap>>20, after.heap>>20)
	// One connection costs a descriptor and two goroutines; each commit,
	// reload or audit opens the storage several times.
	if grew := after.fds - before.fds; grew > 25 {
		t.Errorf("open file descriptors grew by %d over %s: S3 clients or connections are not reused", grew, what)
	}
	if grew := after.goroutines - before.goroutines; grew > 50 {
		t.Errorf("goroutines grew by %d over %s: S3 connections are not reused", grew, what)
	}
	// 250 snapshots add well under 1 MB of metadata; a parsed CA bundle
	// per storage opening added hundreds of MB.
	if grew := int64(after.heap) - int64(before.heap); grew > 32<<20 {
		t.Errorf("heap grew by %d MB over %s: the AWS configuration (and its CA bundle) is built again for each storage opening", grew>>20, what)
	}
}
