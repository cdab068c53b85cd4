package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// partitionsStack starts a local stack with topic of parts partitions.
func partitionsStack(t *testing.T, topic string, parts int32) (*localstack.Stack, catalog.Config, []string) {
	t.Helper()
	st, _, _ := partitionedStack(t, topic, parts)
	cfg := st.Catalog()
	return st, cfg, []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
}

// checkWhereAll checks floe where for every offset below count of every
// partition: a row, in a file that holds it.
func checkWhereAll(t *testing.T, tbl *snapshot.Table, topic string, count map[int32]int64) {
	t.Helper()
	rows := rowsByOffset(t, tbl)
	bad := 0
	for p, n := range count {
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		for off := int64(0); off < n; off++ {
			w, err := lookup.Where(t.Context(), tbl, nil, tp, off)
			if err != nil {
				t.Fatal(err)
			}
			want := lookup.StatusRow
			if rows[tp][off] == 0 {
				want = lookup.StatusNoRow
			}
			if w.Status != want {
				bad++
				if bad < 4 {
					t.Errorf("where %s@%d: %s, want %s (%s)", tp, off, w.Status, want, w.Explanation)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d wrong where answers", bad)
	}
}

// foreignUpdate rewrites, as another engine's UPDATE would, the rows
// filter matches: a delete in mode (copy-on-write or merge-on-read), then
// an append of the same rows with another value, all in one file.
func foreignUpdate(t *testing.T, cfg catalog.Config, name string, filter iceberg.BooleanExpression, mode string) {
	t.Helper()
	old, err := foreignTable(t, cfg, name).Scan(table.WithRowFilter(filter)).ToArrowTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Release()
	n := int(old.NumRows())
	if n < 2 {
		t.Fatalf("want at least 2 rows to update, got %d", n)
	}
	cols := make([]arrow.Array, old.NumCols())
	for i := range cols {
		if old.Column(i).Name() == mapping.ColValue {
			bb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
			for range n {
				bb.Append([]byte("updated"))
			}
			cols[i] = bb.NewArray()
			continue
		}
		chunks := old.Column(i).Data().Chunks()
		c, err := array.Concatenate(chunks, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		cols[i] = c
	}
	upd := array.NewRecordBatch(old.Schema(), cols, int64(n))
	foreignDelete(t, cfg, name, filter, mode)
	tx := foreignTable(t, cfg, name).NewTransaction()
	if err := tx.Append(t.Context(), array.NewTableReader(array.NewTableFromRecords(old.Schema(), []arrow.RecordBatch{upd}), int64(n)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestWhereAfterForeignMergeOnReadUpdate: another engine updates two
// rows of a file group (offset 5 of partitions 0 and 1) merge-on-read, as
// Spark's UPDATE does in a table with write.update.mode=merge-on-read: a
// position delete file hides the old rows in the group's file, which stays
// live, and one new data file holds the two updated rows. The table holds a
// row at every offset; floe where must say so and name the new file (from
// a review: it read the group's files only, and said the table lost them).
func TestWhereAfterForeignMergeOnReadUpdate(t *testing.T) {
	const topic, parts = "mor", 6
	st, cfg, cat := partitionsStack(t, topic, parts)
	count := map[int32]int64{}
	produceRound(t, st.Brokers, topic, parts, 60, count)
	mustFloe(t, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", topic, "--table", "lake.mor", "--stop-at-end"}, cat...)...)
	foreignUpdate(t, cfg, "lake.mor", iceberg.NewAnd(
		iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), int64(5)),
		iceberg.LessThan(iceberg.Reference(mapping.ColPartition), int32(2))), table.WriteModeMergeOnRead)
	tbl := openTable(t, cfg, "lake.mor")
	files, _ := tbl.Files(t.Context(), tbl.Head().SnapshotID)
	for _, f := range files {
		t.Logf("file %s: partitions %d-%d offsets %s rows %d", f.Path, f.PartitionMin, f.PartitionMax, f.Offsets, f.Records)
	}
	rows := rowsByOffset(t, tbl)
	for p := range int32(2) {
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		if rows[tp][5] != 1 {
			t.Fatalf("the table should hold one (updated) row at %s@5, holds %d", tp, rows[tp][5])
		}
	}
	checkWhereAll(t, tbl, topic, count)
	_, out, errs := floe(t, append([]string{"where", "--table", "lake.mor", "--partition", "0", "--offset", "5", "--brokers", st.Brokers[0]}, cat...)...)
	t.Logf("floe where --brokers:\n%s%s", out, errs)
}

// TestAcceptHidesLaterLoss: another engine deletes one row copy-on-write
// (Spark's default): the audit reports the floe file no longer live
// (missing-file) and the rewritten file (foreign-file), a reviewer accepts
// them (--accept). Then the other engine deletes the remaining rows of its
// file: the partition has lost 9 more rows, and the nightly audit with
// --accept must fail. It said COMPLETE (from a review): the missing-file
// finding reads the same (it names the floe file and its 10 rows), and the
// foreign file's finding is gone, which now reopens the partition's
// accepted findings. In a table of several partitions, whose first commit
// wrote one file group, the rewrite is a file of every partition, whose
// foreign-file finding names no partition: once it was gone it marked no
// partition changed, and the audit said COMPLETE again with 59 rows of 6
// partitions gone (from a second review). A data file's finding of no one
// partition that is gone reopens every accepted finding.
func TestAcceptHidesLaterLoss(t *testing.T) {
	for _, c := range []struct {
		name, topic string
		parts       int32
	}{{"one partition", "acc", 1}, {"file group", "accg", 6}} {
		t.Run(c.name, func(t *testing.T) {
			st, cfg, cat := partitionsStack(t, c.topic, c.parts)
			name := "lake." + c.topic
			count := map[int32]int64{}
			sink := append([]string{"sink", "--brokers", st.Brokers[0], "--topic", c.topic, "--table", name, "--stop-at-end"}, cat...)
			for range 2 {
				produceRound(t, st.Brokers, c.topic, c.parts, 10*int(c.parts), count)
				mustFloe(t, sink...)
			}
			foreignDelete(t, cfg, name, iceberg.NewAnd(
				iceberg.EqualTo(iceberg.Reference(mapping.ColOffset), int64(3)),
				iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), int32(0))), table.WriteModeCopyOnWrite)
			audit := append([]string{"audit", "--table", name, "--brokers", st.Brokers[0]}, cat...)
			code, base, errs := floe(t, append(slices.Clone(audit), "--json")...)
			if code != exitFindings {
				t.Fatalf("audit after the reviewed delete: exit %d\n%s%s", code, base, errs)
			}
			baseline := filepath.Join(t.TempDir(), "reviewed.json")
			if err := os.WriteFile(baseline, []byte(base), 0o644); err != nil {
				t.Fatal(err)
			}
			// The other engine now deletes the rest of the first range of
			// every partition: offsets 0-9 but partition 0's 3 were rows.
			foreignDelete(t, cfg, name, iceberg.LessThan(iceberg.Reference(mapping.ColOffset), int64(10)), table.WriteModeCopyOnWrite)
			left := 0
			for _, offs := range rowsByOffset(t, openTable(t, cfg, name)) {
				left += len(offs)
			}
			code, out, errs := floe(t, append(slices.Clone(audit), "--accept", baseline)...)
			if code != exitFindings {
				t.Errorf("nightly audit --accept after %d more rows were deleted: exit %d, want %d (findings)\n%s%s", 20*int(c.parts)-1-left, code, exitFindings, out, errs)
			}
		})
	}
}

// TestAsOfTimeDeadLettersNotHeld (from a review): a JSON table whose
// offset 1 is a dead letter stamped 2h after offset 0; offset 2, stamped
// 30 min after offset 0, arrived later with an older clock. As of record
// time base+1h, every partition is cut before its first record stamped at
// or after it: offset 1, so the table then is offset 0 only. Once the table
// no longer holds that dead letter (another engine dropped the dead-letter
// table; its file was lost and floe maintain
// --drop-missing-dead-letter-files recorded it lost, the documented
// recovery), as-of --time without --brokers answered with offset 2's row:
// it is refused, naming why, since the log can answer.
func TestAsOfTimeDeadLettersNotHeld(t *testing.T) {
	for _, c := range []struct {
		name   string
		remove func(t *testing.T, cfg catalog.Config, cat []string)
		says   string
	}{
		{"dead-letter table dropped", func(t *testing.T, cfg catalog.Config, _ []string) {
			c, err := catalog.Open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ident, _ := catalog.ParseIdent("lake.dl_dlq")
			if err := c.DropTable(t.Context(), ident); err != nil {
				t.Fatal(err)
			}
		}, "dead-letter table lake.dl_dlq, which its ledger names, does not exist"},
		{"dead letters recorded lost", loseDeadLetterFile, "dead-letter table lake.dl_dlq does not hold every dead letter of commit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, cfg, cat, asOf := asOfDLSetup(t)
			checkCut1(t, "before", asOf)
			c.remove(t, cfg, cat)
			if code, out, errs := floe(t, asOf...); code != exitError || !strings.Contains(errs, "does not hold every dead letter") || !strings.Contains(errs, c.says) {
				t.Errorf("as-of --time: exit %d, %s%s; want it refused saying %q", code, out, errs, c.says)
			}
		})
	}
}

// TestWhereUpsertLostRowNotSuperseded (from a review): an upsert table of
// keys k0-k9, one record each (offsets 0-9), then k0 again (offset 10) and
// a tombstone of k1 (offset 11), k7 again and its tombstone (offsets 12
// and 13, in one commit); another engine deletes key k3 (a GDPR
// delete, merge-on-read). floe where --brokers called offset 3 superseded,
// as every committed record of an upsert table without a row: k3's only
// record was lost, and the key's row and deletes tell it from offset 0
// (superseded by offset 10) and offset 1 (its key deleted since).
func TestWhereUpsertLostRowNotSuperseded(t *testing.T) {
	st := topicStack(t, "up")
	cfg := st.Catalog()
	cat := []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}
	var recs []*kgo.Record
	for k := range 10 {
		recs = append(recs, &kgo.Record{Topic: "up", Key: fmt.Appendf(nil, "k%d", k), Value: fmt.Appendf(nil, "v%d", k)})
	}
	recs = append(recs, &kgo.Record{Topic: "up", Key: []byte("k0"), Value: []byte("again")}, &kgo.Record{Topic: "up", Key: []byte("k1")},
		&kgo.Record{Topic: "up", Key: []byte("k7"), Value: []byte("again")}, &kgo.Record{Topic: "up", Key: []byte("k7")})
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	sink := slices.Concat([]string{"sink", "-t", "up", "--table", "lake.up", "--mode", "upsert", "--key", "string", "--stop-at-end", "-b", st.Brokers[0]}, cat)
	mustFloe(t, append(sink, "--flush-records", "10")...)
	foreignDelete(t, cfg, "lake.up", iceberg.EqualTo(iceberg.Reference(mapping.ColKey), "k3"), table.WriteModeMergeOnRead)
	for _, c := range []struct {
		offset int
		kind   string
		says   string
	}{
		{3, lookup.KindMissing, "the table lost it"},
		{0, lookup.KindSuperseded, "the key's row is the record at up/0 offset 10"},
		{1, lookup.KindSuperseded, "its key was deleted since"},
		{11, lookup.KindSuperseded, "it is a tombstone"},
		// Deleted by a later record of its own commit, whose delete of the
		// key is also the one of its older rows.
		{12, lookup.KindSuperseded, "by the record at up/0 offset 13 of the same commit"},
	} {
		out := mustFloe(t, slices.Concat([]string{"where", "--table", "lake.up", "--partition", "0", "--offset", fmt.Sprint(c.offset), "--json", "-b", st.Brokers[0]}, cat)...)
		var w lookup.WhereResult
		if err := json.Unmarshal([]byte(out), &w); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if w.Status != lookup.StatusNoRow || w.Kind != c.kind || !strings.Contains(w.Explanation, c.says) {
			t.Errorf("where up/0@%d --brokers: %s, kind %q: %s; want no_row, kind %s, saying %q", c.offset, w.Status, w.Kind, w.Explanation, c.kind, c.says)
		}
	}
}
