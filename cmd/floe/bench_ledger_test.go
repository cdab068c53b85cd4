package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// BenchmarkLongLedger measures what reading a long ledger costs each
// command, as its own process: a sink resuming on the table (floe sink
// --stop-at-end with nothing left to read), floe where and floe as-of of
// one position, floe status, floe audit (ledger and file levels, and with
// --deep the rows level: the table has no row, so what it costs is the
// ledger's reading), and floe
// maintain --compact (planning on the long ledger: the table has no data
// file to merge, so it commits nothing). Each
// command's peak resident set, wall and CPU time come from /usr/bin/time (GNU
// time waits for its child alone, so the figure is the command's, not this
// process's).
//
// The table's ledger has FLOE_BENCH_LEDGER_COMMITS commits (10,000 by
// default) of one range on each of FLOE_BENCH_LEDGER_PARTITIONS
// partitions (1,000), one offset each and no rows, after a first commit
// recording where every partition starts. It is built once and cached under
// FLOE_BENCH_CACHE (default: the user's cache folder, floe-bench/): the
// first commit and the last ten go through the normal commit path; the
// others are written as ledger archive segments directly, in the archive's
// documented encoding (ArchiveFormat, one entry per expired snapshot with
// its floe. summary properties), split as floe maintain's merges leave them
// (each a quarter of the one before), and named by the table in one
// catalog commit that adds the snapshot they lead to; floe maintain then
// indexes the segments (as it does segments written by floe before
// indexes). The broker is a kfake cluster in this process, holding as many
// offsets per partition as the ledger covers.
//
// FLOE_BENCH_FLOE names the floe binary to measure (default: built from
// this checkout), so that two builds can be compared on one ledger;
// FLOE_BENCH_LEDGER_RUNS the commands to run, comma-separated (default:
// sink,where,as-of,status,files,audit,audit-deep,compact, and where-key on the
// upsert table). FLOE_BENCH_LEDGER_DLQ=1 measures
// a table of its own whose ten commits through the normal path each
// dead-letter one record of partition 0 into bench.ledger_dlq (its rows
// added as a sink adds them): a sink resuming on it reconciles that
// dead-letter table with the ledger first. FLOE_BENCH_LEDGER_COMPACTED=1
// measures a table of its own with one live data file of a floe
// compaction, holding a row at every offset of partition 0 (the ledger's
// ranges count none, so the audit ends with a count mismatch, exit 1,
// which this table allows): a table's audit places compacted files on the
// chains of ranges they span, and held the whole ledger to do so.
// FLOE_BENCH_LEDGER_UPSERT=1 measures the same ledger on an upsert table
// of its own: floe as-of of an upsert table finds the commit boundary at
// or below the position from the commits' ranges in order, and the run
// where-key (floe where --key) looks a key up (it has no row, no delete:
// never seen).
func BenchmarkLongLedger(b *testing.B) {
	commits := benchEnvInt(b, "FLOE_BENCH_LEDGER_COMMITS", 10_000)
	partitions := benchEnvInt(b, "FLOE_BENCH_LEDGER_PARTITIONS", 1_000)
	var v ledgerVariant
	switch {
	case os.Getenv("FLOE_BENCH_LEDGER_DLQ") == "1":
		v = variantDLQ
	case os.Getenv("FLOE_BENCH_LEDGER_COMPACTED") == "1":
		v = variantCompacted
	case os.Getenv("FLOE_BENCH_LEDGER_UPSERT") == "1":
		v = variantUpsert
	}
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		b.Skip("needs GNU time (/usr/bin/time) to measure each command's peak resident set")
	}
	// The binary before the ledger, which can take minutes to build.
	bin := benchFloe(b)
	root := floetest.BenchPath(b, "FLOE_BENCH_CACHE", floetest.BenchCacheFolder)
	if root == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			b.Fatal(err)
		}
		root = filepath.Join(c, "floe-bench")
	}
	dir := filepath.Join(root, fmt.Sprintf("ledger-%s%dx%d", v, commits, partitions))
	if _, err := os.Stat(filepath.Join(dir, "ready")); err != nil {
		start := time.Now()
		buildLongLedger(b, dir, commits, partitions, v)
		b.Logf("built a ledger of %d ranges in %s under %s", commits*partitions, time.Since(start).Round(time.Second), dir)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), "orders"))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	fillPartitions(b, brokers, partitions, commits)

	loc := []string{"--catalog", filepath.Join(dir, "catalog.db"), "--warehouse", filepath.Join(dir, "warehouse"), "--table", "bench.ledger"}
	mid := int64(commits / 3)
	runs := []struct {
		name string
		args []string
	}{
		{"sink", []string{"sink", "--brokers", strings.Join(brokers, ","), "--topic", "orders", "--stop-at-end"}},
		{"where", []string{"where", "--partition", fmt.Sprint(partitions / 2), "--offset", fmt.Sprint(mid)}},
		{"as-of", []string{"as-of", "--offsets", fmt.Sprintf("orders/%d=%d", partitions/2, mid)}},
		{"status", []string{"status", "--json"}},
		{"files", []string{"files", "--json"}},
		{"audit", []string{"audit", "--json"}},
		{"audit-deep", []string{"audit", "--json", "--deep"}},
		{"compact", []string{"maintain", "--compact", "--json"}},
	}
	if v == variantUpsert {
		runs = append(runs, struct {
			name string
			args []string
		}{"where-key", []string{"where", "--key", "k"}})
	}
	only := os.Getenv("FLOE_BENCH_LEDGER_RUNS")
	for b.Loop() {
		for _, r := range runs {
			if only != "" && !slices.Contains(strings.Split(only, ","), r.name) {
				continue
			}
			rss, secs, cpu := timeCommand(b, bin, append(r.args, loc...), v == variantCompacted && r.name == "audit")
			b.ReportMetric(rss, r.name+"-MiB")
			b.ReportMetric(secs, r.name+"-s")
			b.ReportMetric(cpu, r.name+"-cpu-s")
		}
	}
	b.ReportMetric(float64(commits*partitions), "ranges")
}

// ledgerVariant is which table BenchmarkLongLedger measures, "" for the
// plain one: its folder's name prefix.
type ledgerVariant string

const (
	variantDLQ       ledgerVariant = "dlq-"
	variantCompacted ledgerVariant = "compacted-"
	variantUpsert    ledgerVariant = "upsert-"
)

// benchFloe is the floe binary a benchmark measures: FLOE_BENCH_FLOE (an
// absolute path to an executable, checked), or one built from this
// checkout.
func benchFloe(b *testing.B) string {
	if bin := floetest.BenchPath(b, "FLOE_BENCH_FLOE", floetest.BenchProgram); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "floe")
	if out, err := exec.CommandContext(b.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func benchEnvInt(b *testing.B, name string, def int) int { return benchEnvIntFrom(b, name, def, 20) }

// benchEnvIntFrom is benchEnvInt with least as the smallest value taken.
func benchEnvIntFrom(b *testing.B, name string, def, least int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		b.Fatalf("%s=%q: want an integer of at least %d", name, s, least)
	}
	return n
}

// timeCommand runs floe with args under GNU time and returns its peak
// resident set in MiB, its wall time and its CPU time (user and system)
// in seconds: on a shared machine the CPU time is the steadier figure. A
// command that fails fails the benchmark.
func timeCommand(b *testing.B, bin string, args []string, findingsOK bool) (rssMiB, secs, cpu float64) {
	out := filepath.Join(b.TempDir(), "time")
	cmd := exec.CommandContext(b.Context(), "/usr/bin/time", append([]string{"-f", "%M %e %U %S", "-o", out, bin}, args...)...)
	if o, err := cmd.CombinedOutput(); err != nil && !(findingsOK && cmd.ProcessState.ExitCode() == 1) {
		b.Fatalf("floe %s: %v\n%s", strings.Join(args, " "), err, tail(string(o), 2000))
	}
	t, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	// GNU time writes "Command exited with non-zero status N" first.
	lines := strings.Split(strings.TrimSpace(string(t)), "\n")
	f := strings.Fields(lines[len(lines)-1])
	if len(f) != 4 {
		b.Fatalf("time: %q", t)
	}
	var v [4]float64
	for i := range f {
		v[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return v[0] / 1024, v[1], v[2] + v[3]
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }

// fillPartitions produces n empty records to each partition of topic
// orders: the offsets the ledger covers.
func fillPartitions(b *testing.B, brokers []string, partitions, n int) {
	const chunk = 200_000
	recs := make([]*kgo.Record, 0, chunk)
	flush := func() {
		if err := localstack.Produce(b.Context(), brokers, recs, kgo.ProducerLinger(10*time.Millisecond)); err != nil {
			b.Fatal(err)
		}
		recs = recs[:0]
	}
	for p := range int32(partitions) {
		for range n {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p})
			if len(recs) == chunk {
				flush()
			}
		}
	}
	flush()
}

// buildLongLedger builds the table bench.ledger under dir (see
// BenchmarkLongLedger), with dead letters in its live commits when dlq is
// set, and marks dir ready.
func buildLongLedger(b *testing.B, dir string, commits, partitions int, v ledgerVariant) {
	dlq := v == variantDLQ
	ctx := b.Context()
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	cat, err := catalog.Open(ctx, catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse")})
	if err != nil {
		b.Fatal(err)
	}
	opts := snapshot.OpenOptions{Create: true}
	if v == variantUpsert {
		opts.Mode = mapping.ModeUpsert
	}
	tbl, err := snapshot.Open(ctx, cat, []string{"bench", "ledger"}, opts)
	if err != nil {
		b.Fatal(err)
	}
	ranges := func(i int) []mapping.Range {
		rs := make([]mapping.Range, partitions)
		for p := range rs {
			rs[p] = mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: int32(p)}, Interval: mapping.Interval{Low: int64(i - 1), High: int64(i)}}
		}
		return rs
	}
	// Commit 0 records each partition's start.
	starts := ranges(1)
	for p := range starts {
		starts[p].High = 0
		starts[p].Low = 0
	}
	commit := func(rs []mapping.Range) {
		if _, err := tbl.Commit(ctx, snapshot.Flush{Ranges: rs}, snapshot.CommitOptions{Writer: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	if dlq {
		commit = deadLetterCommit(b, cat, tbl)
	}
	commit(starts)
	first := tbl.Head()
	const live = 10
	archivedN := commits - live
	// Archived commits 1..archivedN-1 lead to a live snapshot (commit
	// archivedN) whose files are commit 0's: none.
	meta := tbl.Iceberg().Metadata()
	segDir := strings.TrimPrefix(strings.TrimSuffix(meta.Location(), "/"), "file://") + "/metadata/floe-ledger"
	if err := os.MkdirAll(segDir, 0o755); err != nil {
		b.Fatal(err)
	}
	base := first.TimestampMs - int64(commits) - 1000
	entry := func(i int) snapshot.ArchivedSnapshot {
		c := mapping.Commit{ID: uuid.NewString(), Writer: "bench", Ranges: ranges(i)}
		props, err := c.Encode()
		if err != nil {
			b.Fatal(err)
		}
		s := snapshot.ArchivedSnapshot{SnapshotID: int64(i) + 1_000_000, TimestampMs: base + int64(i), Properties: props}
		parent := first.SnapshotID
		if i > 1 {
			parent = int64(i-1) + 1_000_000
		}
		s.ParentID = &parent
		return s
	}
	segProps := iceberg.Properties{}
	for i := 1; i < archivedN; {
		n := archivedN - i
		if n > 64 {
			n = max(64, n*3/4)
		}
		path := fmt.Sprintf("%s/%05d-%s.json", segDir, n, uuid.NewString())
		writeSegment(b, path, meta.TableUUID().String(), i, i+n, entry)
		segProps[snapshot.PropLedgerSegmentPrefix+strings.TrimSuffix(filepath.Base(path), ".json")] = "file://" + path
		i += n
	}
	headID := int64(archivedN) + 1_000_000
	parent := int64(archivedN-1) + 1_000_000
	head := entry(archivedN)
	props := iceberg.Properties(head.Properties)
	updates := []table.Update{
		table.NewAddSnapshotUpdate(&table.Snapshot{SnapshotID: headID, ParentSnapshotID: &parent, SequenceNumber: meta.LastSequenceNumber() + 1,
			TimestampMs: first.TimestampMs + 1, ManifestList: first.ManifestList,
			Summary: &table.Summary{Operation: table.OpAppend, Properties: props}}),
		table.NewSetSnapshotRefUpdate(table.MainBranch, headID, table.BranchRef, -1, -1, -1),
		table.NewSetPropertiesUpdate(segProps),
	}
	if _, _, err := cat.CommitTable(ctx, tbl.Identifier(), nil, updates); err != nil {
		b.Fatal(err)
	}
	if err := tbl.Refresh(ctx); err != nil {
		b.Fatal(err)
	}
	for i := archivedN + 1; i <= commits; i++ {
		rs := ranges(i)
		if dlq {
			rs[0].DeadLetters = 1
		}
		commit(rs)
	}
	if _, err := tbl.Maintain(ctx, snapshot.MaintainOptions{}); err != nil {
		b.Fatal(err)
	}
	if v == variantCompacted {
		addCompactedFile(b, tbl, commits)
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
}

// addCompactedFile commits to tbl, as a floe compaction (its summary
// property), one data file holding a row at each of the offsets [0, n) of
// partition 0 of topic orders.
func addCompactedFile(b *testing.B, tbl *snapshot.Table, n int) {
	ctx := b.Context()
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		b.Fatal(err)
	}
	defer rb.Release()
	for o := range int64(n) {
		rb.Append(&kgo.Record{Topic: "orders", Partition: 0, Offset: o, Timestamp: time.UnixMilli(1_700_000_000_000 + o)})
	}
	rows := rb.NewBatch()
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(rows, nil) }
	txn := tbl.Iceberg().NewTransaction()
	var files []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl.Iceberg(), tbl.ArrowSchema(), one) {
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, df)
	}
	if err := txn.AddDataFiles(ctx, files, iceberg.Properties{snapshot.KeyOperation: snapshot.OperationCompact}); err != nil {
		b.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		b.Fatal(err)
	}
}

// deadLetterCommit returns a commit of ranges to tbl that puts, for each
// range counting dead letters, a dead letter at its first offset into
// tbl's dead-letter table (created), as a sink's commit does.
func deadLetterCommit(b *testing.B, cat icecat.Catalog, tbl *snapshot.Table) func([]mapping.Range) {
	ctx := b.Context()
	dlq, err := snapshot.OpenDeadLetters(ctx, cat, snapshot.DeadLetterName(tbl.Identifier()), tbl.Name(), true)
	if err != nil {
		b.Fatal(err)
	}
	sc, err := mapping.DeadLetterArrowSchema(dlq.Iceberg().Schema())
	if err != nil {
		b.Fatal(err)
	}
	return func(rs []mapping.Range) {
		f := snapshot.Flush{Ranges: rs, DeadLetters: map[mapping.TopicPartition][]arrow.RecordBatch{}}
		for _, r := range rs {
			if r.DeadLetters == 0 {
				continue
			}
			rb, err := mapping.NewDeadLetterBuilder(memory.DefaultAllocator, sc)
			if err != nil {
				b.Fatal(err)
			}
			rec := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Low, Value: []byte("not JSON")}
			if err := rb.AppendDeadLetter(rec, "bench: not JSON", 0); err != nil {
				b.Fatal(err)
			}
			f.DeadLetters[r.TopicPartition] = []arrow.RecordBatch{rb.NewBatch()}
			rb.Release()
		}
		if _, err := tbl.Commit(ctx, f, snapshot.CommitOptions{Writer: "bench", DeadLetters: dlq}); err != nil {
			b.Fatal(err)
		}
	}
}

// writeSegment writes the entries [from, to) as one archive segment, one
// entry at a time.
func writeSegment(b *testing.B, path, tableUUID string, from, to int, entry func(int) snapshot.ArchivedSnapshot) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintf(w, "{\"format\":%q,\"table-uuid\":%q,\"snapshots\":[", snapshot.ArchiveFormat, tableUUID)
	for i := from; i < to; i++ {
		e, err := json.Marshal(entry(i))
		if err != nil {
			b.Fatal(err)
		}
		if i > from {
			w.WriteByte(',')
		}
		w.Write(e)
		w.WriteByte('\n')
	}
	w.WriteString("]}\n")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
