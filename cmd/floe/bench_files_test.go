//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
)

// BenchmarkFilesByBytes is issue 23's files by bytes: 200,000 records of
// 50 to 100 bytes spread over the 1,000 partitions of a topic (a kfake
// broker in a process of its own), sunk by 'floe sink --stop-at-end
// --flush-records 40000' (5 commits of 40,000 records, ~40 a partition)
// into a SQLite catalog and file warehouse, then compacted by 'floe
// maintain --compact', once into an append table and once into an upsert
// table (--mode upsert --key string; a quarter of the records update a
// key), and (mode=dead-letters) the same records as JSON objects, every
// partition's records at offsets 0, 50, 100 and 150 not JSON, into a
// table with --value json: each commit has dead letters in each of its
// ~200 partitions:
//
//	go test ./cmd/floe/ -run '^$' -bench FilesByBytes -benchtime 1x
//
// It reports, per commit with rows, the data files it added (max and
// mean), their mean size, and the sink's catalog commit time (mean, from
// its "committed" log lines); then the live files after the
// compaction, their mean size and the compaction's wall time. With dead
// letters it reports the dead-letter files each commit lists (max and
// mean, from the ledger) and the dead-letter table's live files after the
// compaction. FLOE_BENCH_BEFORE=PATH runs that floe binary (a build of main; an
// absolute path) on the same topic in the same run, reported with the
// prefix before-.
func BenchmarkFilesByBytes(b *testing.B) {
	const (
		topic      = "wide"
		jsonTopic  = "widejson"
		partitions = 1_000
		records    = 200_000
		flush      = 40_000
	)
	// Both binaries first, the given ones checked before this checkout's
	// build: a wrong path fails at once, not after the records are
	// produced and this build's runs.
	before := floetest.BenchPath(b, "FLOE_BENCH_BEFORE", floetest.BenchProgram)
	bins := [][2]string{{"", benchFloe(b)}}
	if before != "" {
		bins = append(bins, [2]string{"before-", before})
	}
	e := floetest.New(b)
	e.Stack.Brokers = floetest.StartBrokerProcess(b)
	e.Topic(topic, partitions, nil)
	e.Topic(jsonTopic, partitions, nil)
	rng := rand.New(rand.NewPCG(23, 1))
	recs := make([]*kgo.Record, 0, 10_000)
	for i := range records {
		value := make([]byte, 50+rng.IntN(51))
		for j := range value {
			value[j] = byte('a' + rng.IntN(26))
		}
		// A key is in one partition, and a quarter of the records update
		// a key an earlier one wrote (for the upsert tables).
		p, key := int32(i%partitions), fmt.Appendf(nil, "k%d", i%(records*3/4))
		// Every 50th round over the partitions is not JSON: dead letters.
		obj := fmt.Appendf(nil, `{"v":%q}`, value)
		if i/partitions%50 == 0 {
			obj = value
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: key, Value: value},
			&kgo.Record{Topic: jsonTopic, Partition: p, Key: key, Value: obj})
		if len(recs) >= cap(recs)-1 {
			e.Produce(recs)
			recs = recs[:0]
		}
	}
	brokers := strings.Join(e.Stack.Brokers, ",")
	for _, mode := range []string{"append", "upsert"} {
		b.Run("mode="+mode, func(b *testing.B) { benchFilesByBytes(b, bins, brokers, topic, flush, mode) })
	}
	b.Run("mode=dead-letters", func(b *testing.B) { benchFilesByBytes(b, bins, brokers, jsonTopic, flush, "dead-letters") })
}

// benchFilesByBytes runs BenchmarkFilesByBytes's sink and compaction for
// tables of one mode (append, or upsert keyed by the records' keys).
func benchFilesByBytes(b *testing.B, bins [][2]string, brokers, topic string, flush int, mode string) {
	var args []string
	switch mode {
	case "upsert":
		args = []string{"--mode", mode, "--key", "string"}
	case "dead-letters":
		args = []string{"--value", "json"}
	}
	for i := range b.N {
		for _, bin := range bins {
			dir := b.TempDir()
			cfg := catalog.Config{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse")}
			loc := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
			table := fmt.Sprintf("bench.files%d", i)
			sink := exec.CommandContext(b.Context(), bin[1], append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", table,
				"--stop-at-end", "--flush-records", strconv.Itoa(flush), "--compact-interval", "0", "--log-format", "json"}, append(args, loc...)...)...)
			run := runProcess(b, sink, "")
			var commits, files, maxFiles int
			var commit time.Duration
			for l := range strings.Lines(run.stderr) {
				var line struct {
					Msg         string
					Rows, Files int
					Commit      json.RawMessage
				}
				if json.Unmarshal([]byte(l), &line) != nil || line.Msg != "committed" || line.Rows == 0 {
					continue
				}
				commits++
				files += line.Files
				maxFiles = max(maxFiles, line.Files)
				commit += logDuration(b, line.Commit)
			}
			if commits == 0 {
				b.Fatalf("%s sink logged no commit with rows:\n%s", bin[1], tail(run.stderr, 2000))
			}
			tbl := openTable(b, cfg, table)
			var bytes int64
			for _, s := range tbl.Iceberg().Metadata().Snapshots() {
				if s.Summary != nil && mapping.IsFloeCommit(s.Summary.Properties) {
					n, _ := strconv.ParseInt(s.Summary.Properties["added-files-size"], 10, 64)
					bytes += n
				}
			}
			b.ReportMetric(float64(maxFiles), bin[0]+"files/commit-max")
			b.ReportMetric(float64(files)/float64(commits), bin[0]+"files/commit-mean")
			b.ReportMetric(float64(bytes)/float64(files)/1024, bin[0]+"file-KiB-mean")
			b.ReportMetric(float64(commit.Milliseconds())/float64(commits), bin[0]+"commit-ms/commit")
			if mode == "dead-letters" {
				var deadCommits, deadFiles, maxDead int
				for c, err := range tbl.Commits(b.Context(), 0) {
					if err != nil {
						b.Fatal(err)
					}
					if n := len(c.DeadLetterFiles); n > 0 {
						deadCommits, deadFiles, maxDead = deadCommits+1, deadFiles+n, max(maxDead, n)
					}
				}
				if deadCommits == 0 {
					b.Fatalf("%s sink committed no dead letters", bin[1])
				}
				b.ReportMetric(float64(maxDead), bin[0]+"dead-letter-files/commit-max")
				b.ReportMetric(float64(deadFiles)/float64(deadCommits), bin[0]+"dead-letter-files/commit-mean")
			}

			start := time.Now()
			if out, err := exec.CommandContext(b.Context(), bin[1], append([]string{"maintain", "--table", table, "--compact"}, loc...)...).CombinedOutput(); err != nil {
				b.Fatalf("%s maintain --compact: %v\n%s", bin[1], err, out)
			}
			compacted := time.Since(start)
			live, err := openTable(b, cfg, table).Files(b.Context(), 0)
			if err != nil {
				b.Fatal(err)
			}
			var size int64
			for _, f := range live {
				size += f.SizeBytes
			}
			b.ReportMetric(float64(len(live)), bin[0]+"compacted-files")
			b.ReportMetric(float64(size)/float64(len(live))/1024, bin[0]+"compacted-file-KiB-mean")
			b.ReportMetric(compacted.Seconds(), bin[0]+"compact-s")
			if mode == "dead-letters" {
				dead, err := openTable(b, cfg, table+"_dlq").Files(b.Context(), 0)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(dead)), bin[0]+"compacted-dead-letter-files")
			}
		}
	}
}

// logDuration reads a duration of a JSON log line: nanoseconds, or a
// string such as "12ms".
func logDuration(b *testing.B, v json.RawMessage) time.Duration {
	var ns int64
	if json.Unmarshal(v, &ns) == nil {
		return time.Duration(ns)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		b.Fatalf("log duration %s: %v", v, err)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		b.Fatalf("log duration %q: %v", s, err)
	}
	return d
}
