package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

// s67Log is the review's model of a topic's log: for every partition, the
// offset, timestamp and whether it became a row, of every offset the
// broker gave out (markers and aborted records included).
type s67Log struct {
	topic string
	// offsets[p][off] is the record at off of partition p.
	offsets map[int32]map[int64]s67Rec
	next    map[int32]int64
}

type s67Rec struct {
	ts  time.Time
	row bool // a committed data record
}

func newS67Log(topic string) *s67Log {
	return &s67Log{topic: topic, offsets: map[int32]map[int64]s67Rec{}, next: map[int32]int64{}}
}

// add records n plain records of partition p, stamped by ts(i).
func (l *s67Log) produce(t *testing.T, brokers []string, p int32, n int, ts func(i int) time.Time) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: l.topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "v%d-%d", p, l.next[p]+int64(i)), Timestamp: ts(i)})
	}
	if err := localstack.Produce(t.Context(), brokers, recs); err != nil {
		t.Fatal(err)
	}
	l.note(p, recs, true)
}

func (l *s67Log) note(p int32, recs []*kgo.Record, rows bool) {
	if l.offsets[p] == nil {
		l.offsets[p] = map[int64]s67Rec{}
	}
	for _, r := range recs {
		l.offsets[p][r.Offset] = s67Rec{ts: r.Timestamp, row: rows}
		l.next[p] = max(l.next[p], r.Offset+1)
	}
}

// txn writes n records of partition p in one transaction, committed or
// aborted; its marker takes the next offset.
func (l *s67Log) txn(t *testing.T, brokers []string, p int32, n int, commit bool, ts time.Time) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: l.topic, Partition: p, Value: fmt.Appendf(nil, "t%d", i), Timestamp: ts})
	}
	if err := localstack.ProduceTxn(t.Context(), brokers, fmt.Sprintf("s67-%d-%d", p, l.next[p]), recs, commit); err != nil {
		t.Fatal(err)
	}
	l.note(p, recs, commit)
	// The marker.
	l.offsets[p][l.next[p]] = s67Rec{ts: time.Now()}
	l.next[p]++
}

// timeCut is, per partition, the first offset stamped at or after when
// (of a row only, when rowsOnly), or the next offset.
func (l *s67Log) timeCut(when time.Time, rowsOnly bool) map[int32]int64 {
	cut := map[int32]int64{}
	for p, recs := range l.offsets {
		cut[p] = l.next[p]
		for off, r := range recs {
			if (r.row || !rowsOnly) && !r.ts.Before(when) && off < cut[p] {
				cut[p] = off
			}
		}
	}
	return cut
}

// rowsBelow is the set of positions that are rows below cut (a partition
// the cut leaves out: all of its rows).
func (l *s67Log) rowsBelow(cut map[int32]int64) map[string]bool {
	out := map[string]bool{}
	for p, recs := range l.offsets {
		for off, r := range recs {
			if c, ok := cut[p]; r.row && (!ok || off < c) {
				out[fmt.Sprintf("%s/%d@%d", l.topic, p, off)] = true
			}
		}
	}
	return out
}

// asOfRows runs floe as-of with --rows into a JSON lines file and returns
// its positions and the JSON result.
func s67AsOfRows(t *testing.T, dir string, args ...string) (map[string]bool, string) {
	t.Helper()
	out := filepath.Join(dir, fmt.Sprintf("rows-%d.jsonl", time.Now().UnixNano()))
	code, stdout, stderr := floe(t, append([]string{"as-of", "--json", "--rows", "-o", out}, args...)...)
	if code != 0 {
		t.Fatalf("as-of %v: exit %d\n%s\n%s", args, code, stdout, stderr)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// A raw table's rows, or a typed table's (its columns' names).
		var r, typed struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			KTopic    string `json:"kafka_topic"`
			KPart     int32  `json:"kafka_partition"`
			KOffset   int64  `json:"kafka_offset"`
		}
		if err := json.Unmarshal(sc.Bytes(), &typed); err != nil {
			t.Fatal(err)
		}
		r = typed
		if r.Topic == "" {
			r.Topic, r.Partition, r.Offset = typed.KTopic, typed.KPart, typed.KOffset
		}
		k := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
		if got[k] {
			t.Errorf("as-of %v: %s twice", args, k)
		}
		got[k] = true
	}
	return got, stdout
}

func s67Diff(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	var extra, missing []string
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	for k := range want {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	slices.Sort(extra)
	slices.Sort(missing)
	if len(extra)+len(missing) > 0 {
		t.Errorf("%s: %d rows too many %v, %d missing %v", what, len(extra), extra[:min(len(extra), 8)], len(missing), missing[:min(len(missing), 8)])
	}
}

// s67CheckWhere checks floe where for every offset of the log model: a
// row where the log has a committed record, in a file whose bounds hold
// it; no_row for a marker or an aborted record.
func s67CheckWhere(t *testing.T, l *s67Log, loc []string, table string) {
	t.Helper()
	tbl := openTable(t, catalogOf(loc), table)
	rows := rowsByOffset(t, tbl)
	bad := 0
	for p, recs := range l.offsets {
		tp := mapping.TopicPartition{Topic: l.topic, Partition: p}
		for off, r := range recs {
			w, err := lookup.Where(t.Context(), tbl, nil, tp, off)
			if err != nil {
				t.Fatal(err)
			}
			want := lookup.StatusNoRow
			if r.row {
				want = lookup.StatusRow
			}
			if rows[tp][off] != map[bool]int{true: 1, false: 0}[r.row] {
				t.Errorf("table holds %d rows of %s@%d, want row=%v", rows[tp][off], tp, off, r.row)
			}
			if w.Status != want {
				bad++
				if bad < 5 {
					t.Errorf("where %s@%d: %s, want %s (%s)", tp, off, w.Status, want, w.Explanation)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d wrong where answers", bad)
	}
}

func catalogOf(loc []string) catalog.Config {
	return catalog.Config{Catalog: loc[1], Warehouse: loc[3]}
}

// TestReviewS67LookHoldsLongAppend: an append table of many partitions
// (busy ones with files of their own, quiet ones sharing file groups),
// transactions committed and aborted, sunk in many small commits, then
// compacted and expired (the ranges only in the archive), then sunk
// again: where, as-of --offsets and as-of --time give the log's answer.
func TestReviewS67LookHoldsLongAppend(t *testing.T) {
	const topic = "events"
	const parts = 10
	st, brokers, loc := partitionedStack(t, topic, parts)
	dir := t.TempDir()
	l := newS67Log(topic)
	base := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	round := func(r int) {
		for p := int32(0); p < parts; p++ {
			n := 3
			if p < 2 {
				n = 60
			}
			// Timestamps rise with the round, out of order inside it
			// (every third record a minute late).
			l.produce(t, st.Brokers, p, n, func(i int) time.Time {
				s := r*1000 + i*2 + int(p)
				if i%3 == 2 {
					s -= 60
				}
				return at(s)
			})
		}
		l.txn(t, st.Brokers, 2, 4, false, at(r*1000+500))
		l.txn(t, st.Brokers, 3, 4, true, at(r*1000+501))
	}
	sink := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.events", "--stop-at-end", "--flush-records", "45"}, loc...)
	for r := range 3 {
		round(r)
		if code, out, errs := floe(t, sink...); code != 0 {
			t.Fatalf("sink: %d %s %s", code, out, errs)
		}
	}
	if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.events", "--compact", "--expire-older-than", "0s", "--retain-last", "1"}, loc...)...); code != 0 {
		t.Fatalf("maintain: %d %s %s", code, out, errs)
	}
	round(3)
	if code, out, errs := floe(t, sink...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}

	s67CheckWhere(t, l, loc, "lake.events")
	g, one := s67CheckFiles(t, loc, "lake.events")
	t.Logf("files: %d of groups, %d of one partition", g, one)

	// as-of --offsets, every partition named (rows from the head once the
	// snapshot expired).
	for _, frac := range []int{0, 3, 5, 9, 10} {
		cut := map[int32]int64{}
		var items []string
		for p := int32(0); p < parts; p++ {
			cut[p] = l.next[p] * int64(frac) / 10
			items = append(items, fmt.Sprintf("%d=%d", p, cut[p]))
		}
		got, _ := s67AsOfRows(t, dir, append([]string{"--table", "lake.events", "--offsets", strings.Join(items, ",")}, loc...)...)
		s67Diff(t, "as-of --offsets "+strings.Join(items, ","), got, l.rowsBelow(cut))
	}

	// as-of --time, from the table and from the broker.
	for _, sec := range []int{-100, 0, 1, 59, 1000, 1001, 1500, 2050, 3100, 3999} {
		when := at(sec)
		for _, b := range [][]string{nil, {"--brokers", brokers}} {
			// The table's column sees rows only; the broker's time index
			// every record, markers and aborted ones included (docs).
			cut := l.timeCut(when, b == nil)
			args := append(append([]string{"--table", "lake.events", "--time", when.UTC().Format(time.RFC3339Nano)}, loc...), b...)
			got, out := s67AsOfRows(t, dir, args...)
			s67Diff(t, fmt.Sprintf("as-of --time %+ds (brokers %v): %s", sec, b != nil, out), got, l.rowsBelow(cut))
		}
	}

	// replay --from TIME [--until TIME] into new tables: the records from
	// each partition's first offset stamped at or after the time (the
	// broker's ListOffsets: markers and aborted records count).
	for i, span := range [][2]int{{-100, 0}, {1000, 0}, {1001, 2050}, {3999, 0}, {59, 1500}} {
		from := at(span[0])
		name := fmt.Sprintf("lake.replay%d", i)
		args := append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", name, "--from", from.UTC().Format(time.RFC3339Nano)}, loc...)
		low := l.timeCut(from, false)
		high := map[int32]int64{}
		for p := range l.next {
			high[p] = l.next[p]
		}
		if span[1] != 0 {
			args = append(args, "--until", at(span[1]).UTC().Format(time.RFC3339Nano))
			high = l.timeCut(at(span[1]), false)
		}
		if code, out, errs := floe(t, args...); code != 0 {
			t.Fatalf("replay %v: %d %s %s", span, code, out, errs)
		}
		want := map[string]bool{}
		for k := range l.rowsBelow(high) {
			want[k] = true
		}
		for k := range l.rowsBelow(low) {
			delete(want, k)
		}
		got, _ := s67AsOfRows(t, dir, append([]string{"--table", name, "--time", "now"}, loc...)...)
		s67Diff(t, fmt.Sprintf("replay --from %+ds --until %+ds", span[0], span[1]), got, want)
	}
}

// TestReviewS67LookAsOfMixedBelowPublish: after a replay --from a time is
// published onto main (its start: orders/0=0, orders/1=6; --publish-different,
// --tag-main before), main's ledger begins at orders/1=6 while
// main held orders/1 [0, 6) before. A position past the replay's start in
// orders/0 but below it in orders/1 was answered with no row of orders/1,
// as if main had held none of it then; floe as-of refuses a position below
// the publish (docs/replay.md, --tag-main), and must here too.
func TestReviewS67LookAsOfMixedBelowPublish(t *testing.T) {
	const topic = "orders"
	st, brokers, loc := partitionedStack(t, topic, 2)
	l := newS67Log(topic)
	base := time.Now().Add(-time.Hour)
	// orders/0 is stamped after the replay's --from time, orders/1 from
	// its sixth record on.
	l.produce(t, st.Brokers, 0, 10, func(i int) time.Time { return base.Add(time.Duration(100+i) * time.Second) })
	l.produce(t, st.Brokers, 1, 10, func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) })
	if code, out, errs := floe(t, append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.orders", "--stop-at-end"}, loc...)...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	code, out, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.orders", "--branch", "rb", "--from", base.Add(5 * time.Second).UTC().Format(time.RFC3339Nano), "--publish", "--publish-different", "--tag-main", "before"}, loc...)...)
	if code != 0 {
		t.Fatalf("replay: %d %s %s", code, out, errs)
	}
	// Below the publish in both partitions: refused (as it is today).
	if code, out, errs := floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=0,1=3", "--rows"}, loc...)...); code != 2 {
		t.Errorf("as-of 0=0,1=3: exit %d, want 2 (main's history does not reach 1=3)\n%s\n%s", code, out, errs)
	}
	// Past the start in orders/0, below it in orders/1: main held
	// orders/1 [0, 3) then; its history no longer does.
	code, out, errs = floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=6,1=3", "--rows", "--json"}, loc...)...)
	if code != 2 {
		t.Errorf("as-of 0=6,1=3: exit %d, want 2: main held orders/1 [0, 3) at that position, and its history no longer reaches it\n%s\n%s", code, out, errs)
	}
	// Past the start in both: answered, lacking orders/1 below 6, which
	// the tag made before the publish holds.
	out = mustFloe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=6,1=8"}, loc...)...)
	for _, want := range []string{"lacks orders/1 below 6: main's history begins with the replay published from branch rb",
		"tag before holds main's history before the publish: floe as-of --table lake.orders --branch before --offsets orders/0=6,orders/1=8"} {
		if !strings.Contains(out, want) {
			t.Errorf("as-of 0=6,1=8 lacks %q:\n%s", want, out)
		}
	}
}

// TestReviewS67LookAsOfTimeAbortedStartPublish: a replay --from a time
// that ListOffsets places on an aborted transaction (its records are
// stamped at or after the time) begins main's ledger, once published, at
// the aborted records; main held the records before them. floe as-of
// --time of an earlier time, from the table's column (no brokers), cut
// the partition at its first row, past the aborted records and the
// marker, so past main's first offset: the table as of that time was
// answered as holding none of the partition, where main held its records
// stamped before the time; with the brokers the same question is refused
// (main's history no longer reaches it), and so must it be without.
func TestReviewS67LookAsOfTimeAbortedStartPublish(t *testing.T) {
	const topic = "orders"
	st, brokers, loc := partitionedStack(t, topic, 1)
	l := newS67Log(topic)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	l.produce(t, st.Brokers, 0, 10, func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) })
	l.txn(t, st.Brokers, 0, 3, false, base.Add(100*time.Second))
	l.produce(t, st.Brokers, 0, 4, func(i int) time.Time { return base.Add(time.Duration(101+i) * time.Second) })
	if code, out, errs := floe(t, append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.orders", "--stop-at-end"}, loc...)...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	code, out, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.orders", "--branch", "rb",
		"--from", base.Add(50 * time.Second).UTC().Format(time.RFC3339), "--publish", "--publish-different"}, loc...)...)
	if code != 0 || !strings.Contains(out, "orders/0: [10, 18)") {
		t.Fatalf("replay: %d %s %s", code, out, errs)
	}
	when := base.Add(5 * time.Second).UTC().Format(time.RFC3339)
	if code, out, errs := floe(t, append([]string{"as-of", "--table", "lake.orders", "--time", when, "--brokers", brokers}, loc...)...); code != 2 {
		t.Errorf("as-of --time %s --brokers: exit %d, want 2\n%s\n%s", when, code, out, errs)
	}
	if code, out, errs := floe(t, append([]string{"as-of", "--table", "lake.orders", "--time", when, "--rows", "--json"}, loc...)...); code != 2 {
		t.Errorf("as-of --time %s: exit %d, want 2: main held orders/0 [0, 6) as of that time, and its history no longer reaches it\n%s\n%s", when, code, out, errs)
	}
}

// TestReviewS67LookHoldsTwoTopicsSharedPrefix: two topics whose names share
// their first 16 characters (Iceberg truncates the topic column's bounds
// there) into one table, the same partition numbers at overlapping
// offsets, file groups, compaction and expiry: where and as-of give each
// topic's own answer.
func TestReviewS67LookHoldsTwoTopicsSharedPrefix(t *testing.T) {
	const a, b = "customer-events-alpha", "customer-events-beta"
	const parts = 6
	st, brokers, loc := partitionedStack(t, a, parts)
	if err := localstack.CreateTopic(t.Context(), st.Brokers, b, parts, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logs := []*s67Log{newS67Log(a), newS67Log(b)}
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	round := func(r int) {
		for li, l := range logs {
			for p := int32(0); p < parts; p++ {
				n := 2 + int(p)%3
				if p == 0 && li == 0 {
					n = 50
				}
				l.produce(t, st.Brokers, p, n, func(i int) time.Time {
					return base.Add(time.Duration(r*1000+li*7+i*3+int(p)) * time.Second)
				})
			}
		}
		logs[1].txn(t, st.Brokers, 1, 2, false, base.Add(time.Duration(r*1000+400)*time.Second))
	}
	sink := append([]string{"sink", "--brokers", brokers, "-t", a, "-t", b, "--table", "lake.ce", "--stop-at-end", "--flush-records", "30"}, loc...)
	for r := range 3 {
		round(r)
		if code, out, errs := floe(t, sink...); code != 0 {
			t.Fatalf("sink: %d %s %s", code, out, errs)
		}
	}
	if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.ce", "--compact", "--expire-older-than", "0s", "--retain-last", "1"}, loc...)...); code != 0 {
		t.Fatalf("maintain: %d %s %s", code, out, errs)
	}
	round(3)
	if code, out, errs := floe(t, sink...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	for _, l := range logs {
		s67CheckWhere(t, l, loc, "lake.ce")
	}
	s67CheckFiles(t, loc, "lake.ce")
	for _, frac := range []int{0, 4, 7, 10} {
		var items []string
		want := map[string]bool{}
		for _, l := range logs {
			cut := map[int32]int64{}
			for p := int32(0); p < parts; p++ {
				cut[p] = l.next[p] * int64(frac) / 10
				items = append(items, fmt.Sprintf("%s/%d=%d", l.topic, p, cut[p]))
			}
			for k := range l.rowsBelow(cut) {
				want[k] = true
			}
		}
		got, _ := s67AsOfRows(t, dir, append([]string{"--table", "lake.ce", "--offsets", strings.Join(items, ",")}, loc...)...)
		s67Diff(t, fmt.Sprintf("as-of --offsets at %d/10", frac), got, want)
	}
	for _, sec := range []int{0, 1003, 2400, 3010} {
		when := base.Add(time.Duration(sec) * time.Second)
		want := map[string]bool{}
		for _, l := range logs {
			for k := range l.rowsBelow(l.timeCut(when, true)) {
				want[k] = true
			}
		}
		got, out := s67AsOfRows(t, dir, append([]string{"--table", "lake.ce", "--time", when.UTC().Format(time.RFC3339)}, loc...)...)
		s67Diff(t, fmt.Sprintf("as-of --time +%ds: %s", sec, out), got, want)
	}
	// floe files: each listed file of one partition names its topic, and
	// its offsets hold the rows the file has.
	code, out, errs := floe(t, append([]string{"files", "--table", "lake.ce", "--json"}, loc...)...)
	if code != 0 {
		t.Fatalf("files: %d %s %s", code, out, errs)
	}
	var res lookup.FilesResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	grouped, single := 0, 0
	for _, f := range res.Files {
		if f.Group != nil {
			grouped++
		}
		if f.Partition != nil {
			single++
			l := logs[0]
			if f.Topic == b {
				l = logs[1]
			} else if f.Topic != a {
				t.Errorf("file %s of partition %d: topic %q", f.Path, *f.Partition, f.Topic)
				continue
			}
			if *f.MaxOffset >= l.next[*f.Partition] {
				t.Errorf("file %s: %s/%d [%d, %d], past the log's end %d", f.Path, f.Topic, *f.Partition, *f.MinOffset, *f.MaxOffset, l.next[*f.Partition])
			}
		}
	}
	t.Logf("%d files: %d of one partition, %d of file groups", len(res.Files), single, grouped)
}

// s67Keyed is a keyed log: per partition, each offset's key and whether
// its value is null (a tombstone); aborted records and markers are not in
// it (no row, no change).
type s67Keyed struct {
	topic string
	recs  map[int32]map[int64]*kgo.Record
	next  map[int32]int64
}

func (k *s67Keyed) produce(t *testing.T, brokers []string, recs []*kgo.Record) {
	t.Helper()
	if err := localstack.Produce(t.Context(), brokers, recs); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if k.recs[r.Partition] == nil {
			k.recs[r.Partition] = map[int64]*kgo.Record{}
		}
		k.recs[r.Partition][r.Offset] = r
		k.next[r.Partition] = max(k.next[r.Partition], r.Offset+1)
	}
}

// fold is the state below cut: key -> the offset of its latest record.
func (k *s67Keyed) fold(cut map[int32]int64) map[string]int64 {
	out := map[string]int64{}
	for p, recs := range k.recs {
		offs := slices.Sorted(maps.Keys(recs))
		for _, off := range offs {
			if c, ok := cut[p]; ok && off >= c {
				break
			}
			r := recs[off]
			if r.Value == nil {
				delete(out, string(r.Key))
			} else {
				out[string(r.Key)] = off
			}
		}
	}
	return out
}

// TestReviewS67LookHoldsUpsertAsOf: an upsert table keyed by the Kafka
// key, over several partitions, sunk in many small commits with
// tombstones, compacted between: floe as-of --offsets gives the fold of
// the log at the boundary it names, key by key.
func TestReviewS67LookHoldsUpsertAsOf(t *testing.T) {
	const topic = "accounts"
	const parts = 4
	st, brokers, loc := partitionedStack(t, topic, parts)
	k := &s67Keyed{topic: topic, recs: map[int32]map[int64]*kgo.Record{}, next: map[int32]int64{}}
	base := time.Now().Add(-time.Hour)
	n := 0
	round := func() {
		var recs []*kgo.Record
		for p := int32(0); p < parts; p++ {
			for i := range 25 {
				n++
				key := fmt.Appendf(nil, "p%d-k%d", p, (i*7+n)%9)
				var val []byte
				if n%6 != 0 {
					val = fmt.Appendf(nil, "v%d", n)
				}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: key, Value: val, Timestamp: base.Add(time.Duration(n) * time.Second)})
			}
		}
		k.produce(t, st.Brokers, recs)
	}
	sink := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.acc", "--mode", "upsert", "--key", "string", "--stop-at-end", "--flush-records", "40"}, loc...)
	for r := range 4 {
		round()
		if code, out, errs := floe(t, sink...); code != 0 {
			t.Fatalf("sink: %d %s %s", code, out, errs)
		}
		if r == 1 {
			if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.acc", "--compact"}, loc...)...); code != 0 {
				t.Fatalf("maintain: %d %s %s", code, out, errs)
			}
		}
	}
	// where, with the brokers: a row exactly where the fold of the whole
	// log keeps the record, else a superseded record or a tombstone.
	tbl := openTable(t, catalogOf(loc), "lake.acc")
	b, err := connector.Dial(t.Context(), st.Brokers, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	head := k.fold(nil)
	for p, recs := range k.recs {
		if p > 1 {
			continue // two partitions are enough, and each lookup reads the log
		}
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		for off, r := range recs {
			w, err := lookup.Where(t.Context(), tbl, b, tp, off)
			if err != nil {
				t.Fatal(err)
			}
			want, kind := lookup.StatusNoRow, lookup.KindSuperseded
			if h, ok := head[string(r.Key)]; ok && r.Value != nil && h == off {
				want, kind = lookup.StatusRow, ""
			}
			if w.Status != want || w.Kind != kind {
				t.Errorf("where %s@%d (key %s): %s %s, want %s %s (%s)", tp, off, r.Key, w.Status, w.Kind, want, kind, w.Explanation)
			}
		}
	}
	var asks [][]string
	for _, frac := range []int{1, 3, 5, 8, 10} {
		var items []string
		for p := int32(0); p < parts; p++ {
			items = append(items, fmt.Sprintf("%d=%d", p, min(k.next[p], k.next[p]*int64(frac)/10+int64(p))))
		}
		asks = append(asks, []string{"--offsets", strings.Join(items, ",")})
	}
	for _, sec := range []int{1, 30, 101, 250, 399, 401} {
		asks = append(asks, []string{"--time", base.Add(time.Duration(sec) * time.Second).UTC().Format(time.RFC3339Nano), "--brokers", brokers})
	}
	for _, ask := range asks {
		items := ask
		code, out, errs := floe(t, append(append([]string{"as-of", "--table", "lake.acc", "--rows", "--json"}, ask...), loc...)...)
		if code != 0 {
			t.Fatalf("as-of: %d %s %s", code, out, errs)
		}
		var res struct {
			lookup.AsOfResult
			Rows []struct {
				Offset int64  `json:"kafka_offset"`
				Key    string `json:"kafka_key"`
			} `json:"rows"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		at := map[int32]int64{}
		for _, b := range res.Boundary {
			at[b.Partition] = b.Offset
		}
		for _, p := range res.Positions {
			if at[p.Partition] > p.Offset {
				t.Errorf("as-of %v: boundary %v past the position %v", ask, res.Boundary, res.Positions)
			}
		}
		if ask[0] == "--time" {
			when, _ := time.Parse(time.RFC3339Nano, ask[1])
			for _, p := range res.Positions {
				want := k.next[p.Partition]
				for off, r := range k.recs[p.Partition] {
					if !r.Timestamp.Before(when) && off < want {
						want = off
					}
				}
				if p.Offset != want {
					t.Errorf("as-of %v: %d=%d, want %d", ask, p.Partition, p.Offset, want)
				}
			}
		}
		want := k.fold(at)
		got := map[string]int64{}
		for _, r := range res.Rows {
			got[r.Key] = r.Offset
		}
		if !maps.Equal(got, want) {
			t.Errorf("as-of %s (boundary %v): %d keys, want the fold's %d\ngot  %v\nwant %v", strings.Join(items, " "), at, len(got), len(want), got, want)
		}
	}
}

// TestReviewS67LookHoldsDeadLetters: a typed table (--value json) whose
// malformed records go to the dead-letter table, sunk in small commits,
// compacted (both tables) and expired, then sunk again: where names each
// dead letter, and as-of --time counts the dead letters' times.
func TestReviewS67LookHoldsDeadLetters(t *testing.T) {
	const topic = "typed"
	const parts = 3
	st, brokers, loc := partitionedStack(t, topic, parts)
	dir := t.TempDir()
	l := newS67Log(topic)
	dead := map[string]bool{}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	n := 0
	round := func() {
		for p := int32(0); p < parts; p++ {
			var recs []*kgo.Record
			for i := range 20 {
				n++
				v := fmt.Appendf(nil, `{"n":%d,"p":%d}`, n, p)
				if n%5 == 0 {
					v = fmt.Appendf(nil, "not json %d", n)
				}
				// Out of order: every fourth record stamped early.
				sec := n
				if i%4 == 3 {
					sec -= 30
				}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: v, Timestamp: base.Add(time.Duration(sec) * time.Second)})
			}
			if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
				t.Fatal(err)
			}
			l.note(p, recs, true)
			for _, r := range recs {
				if r.Value[0] != '{' {
					dead[fmt.Sprintf("%s/%d@%d", topic, p, r.Offset)] = true
				}
			}
		}
	}
	sink := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.typed", "--value", "json", "--stop-at-end", "--flush-records", "25"}, loc...)
	for r := range 3 {
		round()
		if code, out, errs := floe(t, sink...); code != 0 {
			t.Fatalf("sink: %d %s %s", code, out, errs)
		}
		if r == 1 {
			if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.typed", "--compact", "--expire-older-than", "0s", "--retain-last", "1"}, loc...)...); code != 0 {
				t.Fatalf("maintain: %d %s %s", code, out, errs)
			}
		}
	}
	tbl := openTable(t, catalogOf(loc), "lake.typed")
	for p, recs := range l.offsets {
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		for off := range recs {
			w, err := lookup.Where(t.Context(), tbl, nil, tp, off)
			if err != nil {
				t.Fatal(err)
			}
			want, kind := lookup.StatusRow, ""
			if dead[fmt.Sprintf("%s/%d@%d", topic, p, off)] {
				want, kind = lookup.StatusNoRow, lookup.KindDeadLetter
			}
			if w.Status != want || w.Kind != kind {
				t.Errorf("where %s@%d: %s %s, want %s %s (%s)", tp, off, w.Status, w.Kind, want, kind, w.Explanation)
			}
		}
	}
	for _, sec := range []int{30, 44, 45, 46, 100, 150, 179} {
		when := base.Add(time.Duration(sec) * time.Second)
		cut := l.timeCut(when, false)
		want := l.rowsBelow(cut)
		for k := range dead {
			delete(want, k)
		}
		for _, b := range [][]string{nil, {"--brokers", brokers}} {
			got, out := s67AsOfRows(t, dir, append(append([]string{"--table", "lake.typed", "--time", when.UTC().Format(time.RFC3339)}, loc...), b...)...)
			s67Diff(t, fmt.Sprintf("as-of --time +%ds (brokers %v): %s", sec, b != nil, out), got, want)
		}
	}
}

// s67Table is what a reader sees of a floe table: its rows (position ->
// value columns), its dead letters, and where's answer for every offset.
func s67Table(t *testing.T, loc []string, name string, logs ...*s67Log) (rows map[string]string, dead []string, where map[string]string) {
	t.Helper()
	tbl := openTable(t, catalogOf(loc), name)
	rows = map[string]string{}
	for _, r := range floetest.Rows(t, tbl) {
		k := fmt.Sprintf("%s/%d@%d", r.TP.Topic, r.TP.Partition, r.Offset)
		cols := slices.Sorted(maps.Keys(r.Columns))
		var vals []string
		for _, c := range cols {
			vals = append(vals, c+"="+r.Columns[c])
		}
		rows[k] = fmt.Sprintf("key=%q ts=%d %s", r.Key, r.TS, strings.Join(vals, " "))
	}
	dead = positions(deadLettersJSON(t, append([]string{"--table", name, "--limit", "0"}, loc...)...))
	where = map[string]string{}
	for _, l := range logs {
		for p, recs := range l.offsets {
			tp := mapping.TopicPartition{Topic: l.topic, Partition: p}
			for off := range recs {
				w, err := lookup.Where(t.Context(), tbl, nil, tp, off)
				if err != nil {
					t.Fatal(err)
				}
				where[fmt.Sprintf("%s@%d", tp, off)] = w.Status + " " + w.Kind
			}
		}
	}
	return rows, dead, where
}

// TestReviewS67LookHoldsPublishLikeFresh: a typed table sunk in small
// commits (dead letters, a column appearing late, an aborted transaction,
// a partition spec), compacted, then rebuilt on a branch and published:
// main reads as a fresh sink of the same log does (rows, dead letters,
// where), and so after both sink more.
func TestReviewS67LookHoldsPublishLikeFresh(t *testing.T) {
	const topic = "pub"
	const parts = 5
	st, brokers, loc := partitionedStack(t, topic, parts)
	l := newS67Log(topic)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	n := 0
	round := func(extra bool) {
		for p := int32(0); p < parts; p++ {
			var recs []*kgo.Record
			for range 4 + 6*int(p%2) {
				n++
				v := fmt.Appendf(nil, `{"n":%d,"p":%d}`, n, p)
				switch {
				case n%7 == 0:
					v = fmt.Appendf(nil, "bad %d", n)
				case n%11 == 0:
					v = fmt.Appendf(nil, `{"n":"text %d"}`, n)
				case extra:
					v = fmt.Appendf(nil, `{"n":%d,"p":%d,"late":"x%d"}`, n, p, n)
				}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", n%3), Value: v, Timestamp: base.Add(time.Duration(n) * time.Second)})
			}
			if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
				t.Fatal(err)
			}
			l.note(p, recs, true)
		}
		l.txn(t, st.Brokers, 1, 2, false, base.Add(time.Duration(n)*time.Second))
	}
	flags := []string{"--value", "json", "--partition-by", "bucket(4, kafka_key)"}
	sink := func(table string) {
		t.Helper()
		if code, out, errs := floe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", table, "--stop-at-end", "--flush-records", "13"}, flags, loc)...); code != 0 {
			t.Fatalf("sink %s: %d %s %s", table, code, out, errs)
		}
	}
	round(false)
	sink("lake.pub")
	round(true)
	sink("lake.pub")
	if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.pub", "--compact"}, loc...)...); code != 0 {
		t.Fatalf("maintain: %d %s %s", code, out, errs)
	}
	if code, out, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.pub", "--branch", "rb", "--publish"}, loc...)...); code != 0 {
		t.Fatalf("replay: %d %s %s", code, out, errs)
	}
	sink("lake.fresh")
	compare := func(stage string) {
		t.Helper()
		mr, md, mw := s67Table(t, loc, "lake.pub", l)
		fr, fd, fw := s67Table(t, loc, "lake.fresh", l)
		if !maps.Equal(mr, fr) {
			for k := range fr {
				if mr[k] != fr[k] {
					t.Errorf("%s: main %s: %q, fresh %q", stage, k, mr[k], fr[k])
					break
				}
			}
			t.Errorf("%s: main has %d rows, fresh %d, not the same", stage, len(mr), len(fr))
		}
		if !slices.Equal(md, fd) {
			t.Errorf("%s: dead letters: main %v, fresh %v", stage, md, fd)
		}
		for k := range fw {
			if mw[k] != fw[k] {
				t.Errorf("%s: where %s: main %q, fresh %q", stage, k, mw[k], fw[k])
			}
		}
	}
	if _, md, _ := s67Table(t, loc, "lake.pub", l); len(md) == 0 {
		t.Fatal("no dead letters: the scenario lost its point")
	}
	compare("published")
	round(true)
	sink("lake.pub")
	sink("lake.fresh")
	compare("sunk since")
	s67CheckFiles(t, loc, "lake.pub")
	s67CheckFiles(t, loc, "lake.fresh")
}

// s67FilePositions reads every live data file of table's head: file path ->
// the positions of its rows.
func s67FilePositions(t *testing.T, loc []string, name string) map[string][]string {
	t.Helper()
	tbl := openTable(t, catalogOf(loc), name)
	scan := tbl.Iceberg().Scan(table.WithSelectedFields(mapping.ColTopic, mapping.ColPartition, mapping.ColOffset))
	tasks, err := scan.PlanFiles(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, task := range tasks {
		_, it, err := scan.ReadTasks(t.Context(), []table.FileScanTask{task})
		if err != nil {
			t.Fatal(err)
		}
		for b, err := range it {
			if err != nil {
				t.Fatal(err)
			}
			topic := b.Column(b.Schema().FieldIndices(mapping.ColTopic)[0]).(*array.String)
			part := b.Column(b.Schema().FieldIndices(mapping.ColPartition)[0]).(*array.Int32)
			off := b.Column(b.Schema().FieldIndices(mapping.ColOffset)[0]).(*array.Int64)
			for i := range int(b.NumRows()) {
				out[task.File.FilePath()] = append(out[task.File.FilePath()], fmt.Sprintf("%s/%d@%d", topic.Value(i), part.Value(i), off.Value(i)))
			}
			b.Release()
		}
	}
	return out
}

// s67CheckFiles checks floe files --json against the files' rows: a reader
// that picks the files whose listing (a file's partition and offsets, or
// its group's spans) covers a position finds the position's row among
// them, and no listing names a position its file (or group) lacks a row
// of while another file holds it.
func s67CheckFiles(t *testing.T, loc []string, name string) (groups, singles int) {
	t.Helper()
	code, out, errs := floe(t, append([]string{"files", "--table", name, "--json"}, loc...)...)
	if code != 0 {
		t.Fatalf("files: %d %s %s", code, out, errs)
	}
	var res lookup.FilesResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	actual := s67FilePositions(t, loc, name)
	holder := map[string]string{}
	for f, ps := range actual {
		for _, p := range ps {
			holder[p] = f
		}
	}
	covers := func(f lookup.File, topic string, p int32, off int64) bool {
		if f.Group != nil {
			for _, s := range f.Group.Spans {
				if s.Topic == topic && s.Partition == p && s.Low <= off && off < s.High {
					return true
				}
			}
			return false
		}
		if f.Partition != nil {
			return (f.Topic == "" || f.Topic == topic) && *f.Partition == p && *f.MinOffset <= off && off <= *f.MaxOffset
		}
		return f.MinPartition == nil || *f.MinPartition <= p && p <= *f.MaxPartition
	}
	bad := 0
	for pos, file := range holder {
		var topic string
		var p int32
		var off int64
		i := strings.LastIndex(pos, "/")
		topic = pos[:i]
		fmt.Sscanf(pos[i+1:], "%d@%d", &p, &off)
		var picked []string
		for _, f := range res.Files {
			if covers(f, topic, p, off) {
				picked = append(picked, f.Path)
			}
		}
		if !slices.Contains(picked, file) {
			bad++
			if bad < 4 {
				t.Errorf("files of %s: no listing covers %s, which %s holds", name, pos, file)
			}
		}
	}
	for _, f := range res.Files {
		if f.Group != nil {
			groups++
		} else if f.Partition != nil {
			singles++
		}
	}
	return groups, singles
}

// s67Status runs floe status --json and returns its partitions by number.
func s67Status(t *testing.T, args ...string) map[int32]lookup.PartitionStatus {
	t.Helper()
	code, out, errs := floe(t, append([]string{"status", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("status: %d %s %s", code, out, errs)
	}
	var st lookup.TableStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ps := map[int32]lookup.PartitionStatus{}
	for _, p := range st.Partitions {
		ps[p.Partition] = p
	}
	return ps
}

// TestReviewS67LookHoldsStatusLost: floe status's lag and lost offsets
// when retention deleted unsunk offsets: part of an aborted transaction
// (no loss), or committed records.
func TestReviewS67LookHoldsStatusLost(t *testing.T) {
	const topic = "st"
	st, brokers, loc := partitionedStack(t, topic, 3)
	l := newS67Log(topic)
	base := time.Now().Add(-time.Hour)
	for p := int32(0); p < 3; p++ {
		l.produce(t, st.Brokers, p, 10, func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) })
	}
	sink := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.st", "--stop-at-end"}, loc...)
	if code, out, errs := floe(t, sink...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	for p := int32(0); p < 3; p++ {
		l.txn(t, st.Brokers, p, 3, false, base.Add(time.Minute)) // 10..12, marker 13
		l.produce(t, st.Brokers, p, 6, func(i int) time.Time { return base.Add(time.Duration(70+i) * time.Second) })
	}
	// p0: retention deletes part of the aborted transaction (its marker
	// and a record stay: the evidence); p1: the whole transaction and two
	// committed records; p2: nothing.
	if err := st.Cluster.DeleteRecords(topic, 0, 12); err != nil {
		t.Fatal(err)
	}
	if err := st.Cluster.DeleteRecords(topic, 1, 16); err != nil {
		t.Fatal(err)
	}
	ps := s67Status(t, append([]string{"--table", "lake.st", "--brokers", brokers}, loc...)...)
	for p, want := range map[int32][2]int64{0: {8, 0}, 1: {4, 6}, 2: {10, 0}} {
		got := ps[p]
		lag, lost := int64(-1), int64(0)
		if got.Lag != nil {
			lag = *got.Lag
		}
		if got.Lost != nil {
			lost = *got.Lost
		}
		if lag != want[0] || lost != want[1] {
			t.Errorf("status of %s/%d: lag %d lost %d, want lag %d lost %d", topic, p, lag, lost, want[0], want[1])
		}
	}
	if code, out, errs := floe(t, append(sink, "--on-data-loss", "record")...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	check := func(stage string) {
		t.Helper()
		tbl := openTable(t, catalogOf(loc), "lake.st")
		for p, recs := range l.offsets {
			tp := mapping.TopicPartition{Topic: topic, Partition: p}
			for off, r := range recs {
				w, err := lookup.Where(t.Context(), tbl, nil, tp, off)
				if err != nil {
					t.Fatal(err)
				}
				want := lookup.StatusNoRow
				switch {
				case p == 1 && off >= 10 && off < 16:
					want = lookup.StatusLost
				case r.row:
					want = lookup.StatusRow
				}
				if w.Status != want {
					t.Errorf("%s: where %s@%d: %s, want %s (%s)", stage, tp, off, w.Status, want, w.Explanation)
				}
			}
		}
		for p, s := range s67Status(t, append([]string{"--table", "lake.st", "--brokers", brokers}, loc...)...) {
			if s.Lag == nil || *s.Lag != 0 || s.Lost != nil {
				t.Errorf("%s: status of %s/%d: lag %v lost %v, want 0 and none", stage, topic, p, s.Lag, s.Lost)
			}
		}
	}
	check("sunk")
	if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.st", "--expire-older-than", "0s", "--retain-last", "1"}, loc...)...); code != 0 {
		t.Fatalf("maintain: %d %s %s", code, out, errs)
	}
	check("expired")
}

// TestReviewS67LookHoldsDebeziumKeys: a Debezium table of several
// partitions sunk in small commits, compacted in between: where --key
// names each customer's row at its latest event, and never a row of a
// deleted one; as-of --offsets at the head is the customers table.
func TestReviewS67LookHoldsDebeziumKeys(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 3)
	c.Story(30, 150, 67)
	recs := c.Records(t, floetest.CDCConnectJSON, "")
	st, brokers, loc := partitionedStack(t, topic, 3)
	sink := append([]string{"sink", "-b", brokers, "-t", topic, "--stop-at-end", "--table", "lake.cust", "--envelope", "debezium", "--value", "json", "--key", "json", "--flush-records", "20"}, loc...)
	half := len(recs) / 2
	if err := localstack.Produce(t.Context(), st.Brokers, recs[:half]); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := floe(t, sink...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.cust", "--compact"}, loc...)...); code != 0 {
		t.Fatalf("maintain: %d %s %s", code, out, errs)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs[half:]); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := floe(t, sink...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	// The latest event (not a tombstone) of each id, by its key.
	latest := map[int32]*kgo.Record{}
	for _, r := range recs {
		if r.Value == nil {
			continue
		}
		var k struct {
			Payload struct {
				ID int32 `json:"id"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(r.Key, &k); err != nil {
			t.Fatal(err)
		}
		latest[k.Payload.ID] = r
	}
	state := c.State()
	tbl := openTable(t, catalogOf(loc), "lake.cust")
	b, err := connector.Dial(t.Context(), st.Brokers, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for id, r := range latest {
		res, err := lookup.WhereKey(t.Context(), tbl, b, fmt.Sprintf(`{"id":%d}`, id))
		if err != nil {
			t.Fatal(err)
		}
		if _, live := state[id]; live {
			if res.Status != lookup.KeyStatusRow || res.Offset == nil || *res.Offset != r.Offset || *res.Partition != r.Partition {
				t.Errorf("where --key id %d: %s %v/%v, want its row at %d@%d (%s)", id, res.Status, res.Partition, res.Offset, r.Partition, r.Offset, res.Explanation)
			}
			continue
		}
		if res.Status == lookup.KeyStatusRow || res.Status == lookup.KeyStatusNeverSeen {
			t.Errorf("where --key id %d (deleted): %s (%s)", id, res.Status, res.Explanation)
		}
	}
	c.CheckTable(t, floetest.Rows(t, tbl), floetest.CDCConnectJSON, false)
}

// TestReviewS67LookAsOfEmptyExpired: an append table as of a time before
// its first record is the empty table. Once the snapshot that first
// covers that position has expired, and the table's schema changed since
// (a typed table's first rows add its columns), floe as-of --rows refused
// it (exit 2: "its rows cannot be read", rebuild it with floe replay
// --until 0=0,...), where there are no rows to read: it must answer 0
// rows, as it does while the snapshot is live.
func TestReviewS67LookAsOfEmptyExpired(t *testing.T) {
	const topic = "typed"
	st, brokers, loc := partitionedStack(t, topic, 2)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, `{"n":%d}`, i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	sink := append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.typed", "--value", "json", "--stop-at-end", "--flush-records", "3"}, loc...)
	if code, out, errs := floe(t, sink...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	before := base.Add(-time.Minute).UTC().Format(time.RFC3339)
	asOf := append([]string{"as-of", "--table", "lake.typed", "--time", before, "--rows"}, loc...)
	if code, out, errs := floe(t, asOf...); code != 0 || !strings.Contains(out, "0 rows") {
		t.Fatalf("as-of before the first record, live: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.typed", "--expire-older-than", "0s", "--retain-last", "1"}, loc...)...); code != 0 {
		t.Fatalf("maintain: %d %s %s", code, out, errs)
	}
	if code, out, errs := floe(t, asOf...); code != 0 || !strings.Contains(out, "0 rows") {
		t.Errorf("as-of before the first record, expired: exit %d, want 0 and 0 rows (the empty table)\n%s\n%s", code, out, errs)
	}
}

// TestReviewS67LookUpsertAsOfMixedBelowPublish is
// TestReviewS67LookAsOfMixedBelowPublish on an upsert table: the state as
// of a position past the replay's start in orders/0 and below it in
// orders/1 held no key of orders/1, where main held orders/1's keys of
// [0, 3) then.
func TestReviewS67LookUpsertAsOfMixedBelowPublish(t *testing.T) {
	const topic = "orders"
	st, brokers, loc := partitionedStack(t, topic, 2)
	base := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs,
			&kgo.Record{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "a%d", i%4), Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(100+i) * time.Second)},
			&kgo.Record{Topic: topic, Partition: 1, Key: fmt.Appendf(nil, "b%d", i%4), Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
		t.Fatal(err)
	}
	mode := []string{"--mode", "upsert", "--key", "string"}
	if code, out, errs := floe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.orders", "--stop-at-end", "--flush-records", "4"}, mode, loc)...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	code, out, errs := floe(t, slices.Concat([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.orders", "--branch", "rb",
		"--from", base.Add(5 * time.Second).UTC().Format(time.RFC3339Nano), "--publish", "--publish-different"}, loc)...)
	if code != 0 {
		t.Fatalf("replay: %d %s %s", code, out, errs)
	}
	if code, out, errs := floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=0,1=3", "--rows"}, loc...)...); code != 2 {
		t.Errorf("as-of 0=0,1=3: exit %d, want 2 (main's history does not reach 1=3)\n%s\n%s", code, out, errs)
	}
	code, out, errs = floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=10,1=3", "--rows", "--json"}, loc...)...)
	if code != 2 {
		t.Errorf("as-of 0=10,1=3: exit %d, want 2: main held orders/1's keys of [0, 3) at that position, and its history no longer reaches it\n%s\n%s", code, out, errs)
	}
	// Past the start: the state lacks the keys main held below it.
	if out := mustFloe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=10,1=10"}, loc...)...); !strings.Contains(out, "lacks orders/1 below 6: main's history begins with the replay published from branch rb") {
		t.Errorf("as-of 0=10,1=10 does not say it lacks orders/1 below the replay's start:\n%s", out)
	}
}

// TestReviewS67LookHoldsUpsertPublishLikeFresh: an upsert table of typed
// values (dead letters among them, tombstones) sunk in small commits and
// compacted, rebuilt on a branch and published, reads as a fresh sink of
// the log.
func TestReviewS67LookHoldsUpsertPublishLikeFresh(t *testing.T) {
	const topic = "kv"
	const parts = 3
	st, brokers, loc := partitionedStack(t, topic, parts)
	l := newS67Log(topic)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	n := 0
	round := func() {
		for p := int32(0); p < parts; p++ {
			var recs []*kgo.Record
			for range 12 {
				n++
				v := fmt.Appendf(nil, `{"n":%d}`, n)
				switch {
				case n%9 == 0:
					v = nil
				case n%7 == 0:
					v = []byte("bad")
				}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "p%d-%d", p, n%5), Value: v, Timestamp: base.Add(time.Duration(n) * time.Second)})
			}
			if err := localstack.Produce(t.Context(), st.Brokers, recs); err != nil {
				t.Fatal(err)
			}
			l.note(p, recs, true)
		}
	}
	flags := []string{"--mode", "upsert", "--key", "string", "--value", "json"}
	sink := func(table string) {
		t.Helper()
		if code, out, errs := floe(t, slices.Concat([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", table, "--stop-at-end", "--flush-records", "10"}, flags, loc)...); code != 0 {
			t.Fatalf("sink %s: %d %s %s", table, code, out, errs)
		}
	}
	round()
	sink("lake.kv")
	if code, out, errs := floe(t, append([]string{"maintain", "--table", "lake.kv", "--compact"}, loc...)...); code != 0 {
		t.Fatalf("maintain: %d %s %s", code, out, errs)
	}
	round()
	sink("lake.kv")
	if code, out, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.kv", "--branch", "rb", "--publish"}, loc...)...); code != 0 {
		t.Fatalf("replay: %d %s %s", code, out, errs)
	}
	sink("lake.fresh")
	compare := func(stage string) {
		t.Helper()
		mr, md, mw := s67Table(t, loc, "lake.kv", l)
		fr, fd, fw := s67Table(t, loc, "lake.fresh", l)
		if len(md) == 0 {
			t.Fatal("no dead letters: the scenario lost its point")
		}
		if !maps.Equal(mr, fr) {
			t.Errorf("%s: main has %d rows, fresh %d, not the same", stage, len(mr), len(fr))
		}
		if !slices.Equal(md, fd) {
			t.Errorf("%s: dead letters: main %v, fresh %v", stage, md, fd)
		}
		for k := range fw {
			if mw[k] != fw[k] {
				t.Errorf("%s: where %s: main %q, fresh %q", stage, k, mw[k], fw[k])
			}
		}
	}
	compare("published")
	round()
	sink("lake.kv")
	sink("lake.fresh")
	compare("sunk since")
}

// TestReviewS67LookPublishedLostPrefix: main sank orders/0 [0, 20); then
// retention deleted [0, 15), and a replay from earliest onto a branch
// recorded [0, 15) as lost, and was published (--publish-different).
// The publish said that the replay began where main's ledger did, "so
// floe as-of reaches the positions it reached before"; it does not: as-of
// 0=10 answered 0 rows, the table lacking [0, 10) "lost: retention
// deleted them before they were sunk", and where of offset 5 "deleted by
// retention before it was sunk", where main had sunk them and held their
// rows until the publish. Main's history no longer reaches there: as-of
// must refuse the position (as it does below a replay's later start), and
// where must not say that the offset was never sunk.
func TestReviewS67LookPublishedLostPrefix(t *testing.T) {
	const topic = "orders"
	st, brokers, loc := partitionedStack(t, topic, 1)
	l := newS67Log(topic)
	l.produce(t, st.Brokers, 0, 20, func(i int) time.Time { return time.Now().Add(-time.Hour + time.Duration(i)*time.Second) })
	if code, out, errs := floe(t, append([]string{"sink", "--brokers", brokers, "--topic", topic, "--table", "lake.orders", "--stop-at-end"}, loc...)...); code != 0 {
		t.Fatalf("sink: %d %s %s", code, out, errs)
	}
	if code, out, _ := floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=10", "--rows"}, loc...)...); code != 0 || !strings.Contains(out, "10 rows") {
		t.Fatalf("as-of 0=10 before: exit %d\n%s", code, out)
	}
	if err := st.Cluster.DeleteRecords(topic, 0, 15); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, append([]string{"replay", "--brokers", brokers, "--topic", topic, "--table", "lake.orders", "--branch", "rb", "--publish", "--publish-different"}, loc...)...)
	if code != 0 {
		t.Fatalf("replay: %d %s %s", code, out, errs)
	}
	if strings.Contains(out, "floe as-of reaches the positions it reached before") {
		t.Errorf("the publish says as-of reaches the positions it reached before, which main's history no longer holds rows of:\n%s", out)
	}
	code, out, errs = floe(t, append([]string{"as-of", "--table", "lake.orders", "--offsets", "0=10", "--rows"}, loc...)...)
	if code != 2 {
		t.Errorf("as-of 0=10 after the publish: exit %d, want 2 (main held [0, 10) then; its history no longer reaches it)\n%s\n%s", code, out, errs)
	}
	code, out, errs = floe(t, append([]string{"where", "--table", "lake.orders", "--partition", "0", "--offset", "5"}, loc...)...)
	if code != 0 || strings.Contains(out, "before it was sunk") {
		t.Errorf("where 0@5 after the publish: exit %d; main had sunk it, yet:\n%s\n%s", code, out, errs)
	}
}
