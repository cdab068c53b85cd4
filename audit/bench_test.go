package audit_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/memprobe"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// benchTable creates an empty floe table in a fresh catalog.
func benchTable(b *testing.B, name string) *snapshot.Table {
	b.Helper()
	dir := b.TempDir()
	cat, err := catalog.Open(b.Context(), catalog.Config{Catalog: dir + "/catalog.db", Warehouse: dir + "/warehouse"})
	if err != nil {
		b.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	tbl, err := snapshot.Open(b.Context(), cat, ident, snapshot.OpenOptions{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	return tbl
}

// BenchmarkLedgerAudit audits a table of 10,000 floe snapshots across 16
// partitions at the ledger level. The snapshots carry real ledger
// properties but no data files: they are added to the table metadata in
// one catalog commit, since 10,000 separate commits would spend hours
// rewriting metadata.json and measure the commit path, not the audit.
//
// "load+audit" reloads the table from the catalog (reading and parsing the
// 10,000-snapshot metadata.json) and audits it: what floe audit costs on
// such a table. "audit" measures audit.Run on loaded metadata: decoding the
// ledger from summaries, coverage and the report.
func BenchmarkLedgerAudit(b *testing.B) {
	const (
		snapshots  = 10_000
		partitions = 16
		perRange   = 1000
	)
	tbl := benchTable(b, "bench.ledger")
	updates := make([]table.Update, 0, snapshots+1)
	var parent *int64
	start := time.Now().UnixMilli()
	for i := range snapshots {
		c := mapping.Commit{ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), Writer: "bench"}
		for p := range int32(partitions) {
			c.Ranges = append(c.Ranges, mapping.Range{TopicPartition: mapping.TopicPartition{Topic: "orders", Partition: p},
				Interval: mapping.Interval{Low: int64(i) * perRange, High: int64(i+1) * perRange}, Records: perRange - 2})
		}
		props, err := c.Encode()
		if err != nil {
			b.Fatal(err)
		}
		id := int64(i + 1)
		updates = append(updates, table.NewAddSnapshotUpdate(&table.Snapshot{
			SnapshotID: id, ParentSnapshotID: parent, SequenceNumber: id, TimestampMs: start + int64(i),
			ManifestList: fmt.Sprintf("%s/metadata/snap-%d.avro", tbl.Iceberg().Location(), id),
			Summary:      &table.Summary{Operation: table.OpAppend, Properties: props},
		}))
		parent = &id
	}
	updates = append(updates, table.NewSetSnapshotRefUpdate(table.MainBranch, snapshots, table.BranchRef, -1, -1, -1))
	if _, _, err := tbl.Catalog().CommitTable(b.Context(), tbl.Identifier(), nil, updates); err != nil {
		b.Fatal(err)
	}
	if err := tbl.Refresh(b.Context()); err != nil {
		b.Fatal(err)
	}

	run := func(b *testing.B, reload bool) {
		for b.Loop() {
			if reload {
				if err := tbl.Refresh(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			rep, err := audit.Run(b.Context(), tbl, audit.Options{Depth: audit.DepthLedger})
			if err != nil {
				b.Fatal(err)
			}
			if !rep.Complete() || rep.Evidence.Commits != snapshots || len(rep.Partitions) != partitions {
				b.Fatalf("report: complete %v, %d commits, %d partitions", rep.Complete(), rep.Evidence.Commits, len(rep.Partitions))
			}
		}
		b.ReportMetric(float64(snapshots), "snapshots")
		b.ReportMetric(float64(snapshots*partitions)*float64(b.N)/b.Elapsed().Seconds(), "ranges/s")
	}
	b.Run("load+audit", func(b *testing.B) { run(b, true) })
	b.Run("audit", func(b *testing.B) { run(b, false) })
}

// BenchmarkRowAudit audits a table of 10,000,000 rows (16 partitions, 10
// commits of 62,500 rows per partition, so 160 data files) at the rows
// level: the manifests, then the partition and offset columns of every
// file. FLOE_BENCH_ROWS overrides the row count. Building the table takes
// seconds and is not measured. Each row carries a key, a header and a
// distinct 60-byte JSON value, which the rows level does not read;
// "all-columns" scans every column of the same files, for reference.
func BenchmarkRowAudit(b *testing.B) {
	rows := int64(10_000_000)
	if s := os.Getenv("FLOE_BENCH_ROWS"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 16 {
			b.Fatalf("FLOE_BENCH_ROWS=%q: want a row count of at least 16", s)
		}
		rows = n
	}
	const (
		partitions = 16
		commits    = 10
	)
	perFile := rows / partitions / commits
	rows = perFile * partitions * commits
	tbl := benchTable(b, "bench.rows")
	rec := &kgo.Record{Topic: "orders", Key: []byte("customer-0042"),
		Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("web")}}, Timestamp: time.UnixMilli(1_700_000_000_000)}
	var value []byte
	built := time.Now()
	for c := range int64(commits) {
		f := snapshot.Flush{Batches: map[mapping.TopicPartition][]arrow.RecordBatch{}}
		for p := range int32(partitions) {
			tp := mapping.TopicPartition{Topic: "orders", Partition: p}
			rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
			if err != nil {
				b.Fatal(err)
			}
			rec.Partition = p
			for o := c * perFile; o < (c+1)*perFile; o++ {
				rec.Offset = o
				value = append(value[:0], `{"order_id":`...)
				value = strconv.AppendInt(value, o*31+int64(p), 10)
				value = append(value, `,"amount_cents":`...)
				value = strconv.AppendInt(value, o%99991, 10)
				value = append(value, `,"currency":"EUR"}`...)
				rec.Value = value
				rb.Append(rec)
			}
			f.Batches[tp] = []arrow.RecordBatch{rb.NewBatch()}
			rb.Release()
			f.Ranges = append(f.Ranges, mapping.Range{TopicPartition: tp,
				Interval: mapping.Interval{Low: c * perFile, High: (c + 1) * perFile}, Records: perFile})
		}
		if _, err := tbl.Commit(b.Context(), f, snapshot.CommitOptions{Writer: "bench", Logger: quietLogger()}); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built %d rows in %d files in %s", rows, partitions*commits, time.Since(built).Round(time.Second))

	b.Run("rows-level", func(b *testing.B) {
		for b.Loop() {
			rep, err := audit.Run(b.Context(), tbl, audit.Options{Depth: audit.DepthRows})
			if err != nil {
				b.Fatal(err)
			}
			if !rep.Complete() || rep.RowsRead != rows {
				b.Fatalf("report: complete %v, %d rows read, want %d", rep.Complete(), rep.RowsRead, rows)
			}
		}
		b.ReportMetric(float64(rows), "rows")
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("all-columns", func(b *testing.B) {
		for b.Loop() {
			var n int64
			err := tbl.ScanFiles(b.Context(), 0, snapshot.ScanOptions{}, func(fb snapshot.FileBatch) error {
				if !fb.Done {
					n += fb.Batch.NumRows()
				}
				return nil
			})
			if err != nil || n != rows {
				b.Fatalf("scanned %d rows, err %v", n, err)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// BenchmarkContentWide audits at the content level the same number of
// records sunk from one partition and spread over 200, whose flushes
// share files (file groups), in one run, and reports the wide audit's time
// as a multiple of the narrow one's (wide/narrow). The content level read
// the table once per partition, so each shared file once per partition:
// 600,000 records over 500 partitions took 47 times as long as in one (a
// new user's run). FLOE_BENCH_RECORDS overrides the 50,000 records.
func BenchmarkContentWide(b *testing.B) {
	n := benchRecords(b, 50_000, 200)
	e := newEnv(b)
	audited := func(topic string, partitions int32) func() time.Duration {
		e.Topic(topic, partitions, nil)
		for p := range partitions {
			e.Produce(records(topic, p, n/int(partitions), "w"))
		}
		tbl := e.Table("lake." + topic)
		e.sink(tbl, connector.Config{Topic: topic, FlushRecords: n / 4})
		return func() time.Duration {
			start := time.Now()
			rep, err := audit.Run(b.Context(), tbl, audit.Options{Broker: e.Broker(), VerifyContent: true})
			if err != nil {
				b.Fatal(err)
			}
			if !rep.Complete() {
				b.Fatalf("audit of %s: %+v", topic, rep.Findings)
			}
			return time.Since(start)
		}
	}
	narrow, wide := audited("narrow", 1), audited("wide", 200)
	var tn, tw time.Duration
	for b.Loop() {
		tn += narrow()
		tw += wide()
	}
	b.ReportMetric(tw.Seconds()/tn.Seconds(), "wide/narrow")
	b.ReportMetric(tn.Seconds()/float64(b.N), "narrow_s")
	b.ReportMetric(tw.Seconds()/float64(b.N), "wide_s")
}

// BenchmarkContentMemory audits at the content level (--verify-content)
// a table of one partition of N records of ~200 bytes (FLOE_BENCH_RECORDS,
// 100,000 by default) and one of 4N, in one run, and reports the peak
// live heap of each audit (memprobe.Peak) and their ratio: what the
// level holds at once apart from the records' count (the table's and the
// log's read batches) and what it holds per record (the digests of the
// partition's rows, compared with the log's).
func BenchmarkContentMemory(b *testing.B) {
	n := benchRecords(b, 100_000, 1000)
	e := newEnv(b)
	// Random values: the log's batches compress as real records do, not
	// a hundredfold (a fetch of 8 MiB would then decode to most of the
	// partition).
	rnd := rand.NewChaCha8([32]byte{})
	audited := func(topic string, n int) func() uint64 {
		e.Topic(topic, 1, nil)
		recs := make([]*kgo.Record, n)
		pad := make([]byte, 90)
		for i := range recs {
			_, _ = rnd.Read(pad)
			recs[i] = &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d,"s":"%x"}`, i, pad)}
		}
		e.Produce(recs)
		tbl := e.Table("lake." + topic)
		e.sink(tbl, connector.Config{Topic: topic})
		return func() uint64 {
			var rep *audit.Report
			var err error
			peak, _ := memprobe.Peak(func() {
				rep, err = audit.Run(b.Context(), tbl, audit.Options{Broker: e.Broker(), VerifyContent: true})
			})
			if err != nil {
				b.Fatal(err)
			}
			if !rep.Complete() {
				b.Fatalf("audit of %s: %+v", topic, rep.Findings)
			}
			return peak
		}
	}
	small, large := audited("small", n), audited("large", 4*n)
	var ps, pl uint64
	for b.Loop() {
		runtime.GC()
		ps = max(ps, small())
		runtime.GC()
		pl = max(pl, large())
	}
	const mib = 1 << 20
	b.ReportMetric(float64(ps)/mib, "peak_MiB_N")
	b.ReportMetric(float64(pl)/mib, "peak_MiB_4N")
	b.ReportMetric(float64(pl)/float64(ps), "4N/N")
	b.ReportMetric((float64(pl)-float64(ps))/float64(3*n), "B/record")
}

// benchRecords is FLOE_BENCH_RECORDS, a record count of at least least,
// or def when it is not set.
func benchRecords(b *testing.B, def, least int) int {
	s := os.Getenv("FLOE_BENCH_RECORDS")
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < least {
		b.Fatalf("FLOE_BENCH_RECORDS=%q: want a record count of at least %d", s, least)
	}
	return v
}
