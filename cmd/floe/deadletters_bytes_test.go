package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/snapshot"
)

// wideDeadLetters is a topic wide of parts partitions sunk with --value
// json into lake.wide, each round producing a row and a dead letter in
// every partition.
type wideDeadLetters struct {
	t     *testing.T
	st    *localstack.Stack
	cfg   catalog.Config
	loc   []string
	parts int
	round int
}

func newWideDeadLetters(t *testing.T, parts int) *wideDeadLetters {
	t.Helper()
	st, err := localstack.Start(t.Context(), localstack.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "wide", int32(parts), nil); err != nil {
		t.Fatal(err)
	}
	cfg := st.Catalog()
	return &wideDeadLetters{t: t, st: st, cfg: cfg, loc: []string{"--catalog", cfg.Catalog, "--warehouse", cfg.Warehouse}, parts: parts}
}

// sink produces a round (a row and, unless rowsOnly, a dead letter in
// every partition) and sinks it in one commit.
func (w *wideDeadLetters) sink(rowsOnly bool) {
	w.t.Helper()
	var recs []*kgo.Record
	for p := range w.parts {
		recs = append(recs, &kgo.Record{Topic: "wide", Partition: int32(p), Value: fmt.Appendf(nil, `{"id":%d}`, w.round)})
		if !rowsOnly {
			recs = append(recs, &kgo.Record{Topic: "wide", Partition: int32(p), Value: fmt.Appendf(nil, "not json %d/%d", p, w.round)})
		}
	}
	w.round++
	if err := localstack.Produce(w.t.Context(), w.st.Brokers, recs); err != nil {
		w.t.Fatal(err)
	}
	mustFloe(w.t, slices.Concat([]string{"sink", "-t", "wide", "--table", "lake.wide", "--value", "json", "--stop-at-end", "-b", w.st.Brokers[0]}, w.loc)...)
}

// deadLetterFiles returns, per commit of lake.wide's ledger with dead
// letters, the dead-letter files it lists, in ledger order.
func (w *wideDeadLetters) deadLetterFiles() []int {
	w.t.Helper()
	var out []int
	for c, err := range openTable(w.t, w.cfg, "lake.wide").Commits(w.t.Context(), 0) {
		if err != nil {
			w.t.Fatal(err)
		}
		if len(c.DeadLetterFiles) > 0 {
			out = append(out, len(c.DeadLetterFiles))
		}
	}
	return out
}

// liveDeadLetterFiles counts the data files of lake.wide_dlq's head.
func (w *wideDeadLetters) liveDeadLetterFiles() int {
	w.t.Helper()
	files, err := openTable(w.t, w.cfg, "lake.wide_dlq").Files(w.t.Context(), 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return len(files)
}

// check runs what reads the dead letters, each of which must find all of
// them: floe audit --deep --verify-content (complete), floe dead-letters
// (every one listed, no note) and floe where (the first and the last
// listed, each in a live file of the dead-letter table).
func (w *wideDeadLetters) check(stage string, dead int) {
	w.t.Helper()
	code, out, errs := floe(w.t, slices.Concat([]string{"audit", "--table", "lake.wide", "--deep", "--verify-content", "-b", w.st.Brokers[0]}, w.loc)...)
	if code != exitOK {
		w.t.Errorf("%s: audit --deep --verify-content: exit %d\n%s%s", stage, code, out, errs)
	}
	res := deadLettersJSON(w.t, slices.Concat([]string{"--table", "lake.wide", "--limit", "0"}, w.loc)...)
	seen := map[string]bool{}
	for _, d := range res.DeadLetters {
		seen[fmt.Sprintf("%d@%d", d.Partition, d.Offset)] = true
	}
	if res.Matched != int64(dead) || res.Counted != int64(dead) || len(seen) != dead || len(res.Notes) > 0 {
		w.t.Errorf("%s: dead-letters lists %d distinct of %d matched, %d counted, notes %q; want %d", stage, len(seen), res.Matched, res.Counted, res.Notes, dead)
	}
	files, err := openTable(w.t, w.cfg, "lake.wide_dlq").Files(w.t.Context(), 0)
	if err != nil {
		w.t.Fatal(err)
	}
	// The first dead letter listed and the last, in the oldest commit's
	// files and the newest's.
	for _, d := range []lookup.DeadLetter{res.DeadLetters[0], res.DeadLetters[len(res.DeadLetters)-1]} {
		code, out, errs = floe(w.t, slices.Concat([]string{"where", "--table", "lake.wide", "--partition", fmt.Sprint(d.Partition), "--offset", fmt.Sprint(d.Offset), "--json"}, w.loc)...)
		var where struct{ Kind, File string }
		if code != exitOK || json.Unmarshal([]byte(out), &where) != nil || where.Kind != "dead_letter" {
			w.t.Fatalf("%s: where wide/%d offset %d: exit %d\n%s%s", stage, d.Partition, d.Offset, code, out, errs)
		}
		if !slices.ContainsFunc(files, func(f snapshot.DataFile) bool { return f.Path == where.File }) {
			w.t.Errorf("%s: where names file %s, which is not a live file of lake.wide_dlq", stage, where.File)
		}
	}
}

// TestDeadLettersFilesByBytes: a commit with a dead letter in each of 200
// partitions writes its dead letters into one file of the dead-letter
// table (sized by bytes), where it wrote a file per partition, 200 of
// them. The audit (content verified against the log), floe dead-letters
// and floe where find every dead letter in those files, and floe maintain
// --compact merges two commits' files, each of 200 partitions, into one
// (it merged a dead-letter table's files per Kafka partition, so a file of
// several could never be merged), after which they still do.
func TestDeadLettersFilesByBytes(t *testing.T) {
	const parts = 200
	w := newWideDeadLetters(t, parts)
	w.sink(false)
	w.sink(false)
	if got := w.deadLetterFiles(); !slices.Equal(got, []int{1, 1}) {
		t.Fatalf("dead-letter files per commit with dead letters in %d partitions: %v; want one each", parts, got)
	}
	w.check("before compaction", 2*parts)
	out := mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.wide", "--compact", "--json"}, w.loc)...)
	if n := w.liveDeadLetterFiles(); n != 1 {
		t.Fatalf("lake.wide_dlq has %d files after floe maintain --compact, want 1:\n%s", n, out)
	}
	w.check("after compaction", 2*parts)
}

// TestDeadLettersMixedFileLayouts: a dead-letter table holding files of
// one partition each (as an older floe wrote them: here the first round,
// written under write.target-file-size-bytes=1, which rolls a file after
// each partition's batch) and a later commit's file of every partition
// reads as one: the audit, floe dead-letters and floe where find every
// dead letter, and compaction merges old files and new into one file.
func TestDeadLettersMixedFileLayouts(t *testing.T) {
	const parts = 20
	w := newWideDeadLetters(t, parts)
	w.sink(true) // creates lake.wide_dlq, empty
	setDeadLetterTargetSize(t, w.cfg, "1")
	w.sink(false)
	setDeadLetterTargetSize(t, w.cfg, fmt.Sprint(512<<20))
	w.sink(false)
	if got := w.deadLetterFiles(); !slices.Equal(got, []int{parts, 1}) {
		t.Fatalf("dead-letter files per commit: %v; want %d (one per partition) then 1", got, parts)
	}
	w.check("mixed layouts", 2*parts)
	mustFloe(t, slices.Concat([]string{"maintain", "--table", "lake.wide", "--compact"}, w.loc)...)
	if n := w.liveDeadLetterFiles(); n != 1 {
		t.Fatalf("lake.wide_dlq has %d files after floe maintain --compact, want 1", n)
	}
	w.check("mixed layouts compacted", 2*parts)
}

// setDeadLetterTargetSize sets write.target-file-size-bytes of
// lake.wide_dlq.
func setDeadLetterTargetSize(t *testing.T, cfg catalog.Config, size string) {
	t.Helper()
	if err := openTable(t, cfg, "lake.wide_dlq").SetProperties(t.Context(), map[string]string{table.WriteTargetFileSizeBytesKey: size}); err != nil {
		t.Fatal(err)
	}
}
