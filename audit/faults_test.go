package audit_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// Each test injects one fault and checks that the cheapest level able to
// see it reports it exactly, and that cheaper levels report nothing.

func TestFaultGap(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.gap")
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	commit(t, tbl, tp, 0, 10, span(0, 10))
	forceCommit(t, tbl, tp, 15, 20, span(15, 20)) // skips [10, 15)
	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth} {
		rep := e.audit(tbl, opts)
		expectFindings(t, rep, "ledger gap t/0 [10, 15)")
		if p := rep.Partitions[0]; len(p.Gaps) != 1 || p.Gaps[0] != (mapping.Interval{Low: 10, High: 15}) {
			t.Fatalf("partition gaps %v", p.Gaps)
		}
	}
}

func TestFaultOverlap(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.overlap")
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	commit(t, tbl, tp, 0, 10, span(0, 10))
	forceCommit(t, tbl, tp, 5, 15, span(5, 15)) // commits [5, 10) again
	expectFindings(t, e.audit(tbl, ledgerOnly), "ledger overlap t/0 [5, 10)")
	expectFindings(t, e.audit(tbl, filesDepth), "ledger overlap t/0 [5, 10)")
	// The rows level sees the consequence: the offsets are held twice.
	expectFindings(t, e.audit(tbl, rowsDepth), "ledger overlap t/0 [5, 10)", "rows duplicate t/0 [5, 10)")
}

// sunkTable sinks 3 partitions of 60 records each in three runs, so that
// each partition has ranges and files [0, 20), [20, 40) and [40, 60).
func sunkTable(t *testing.T, e *env, name string) *snapshot.Table {
	t.Helper()
	e.Topic(name, 3, nil)
	tbl := e.Table("lake." + name)
	for run := range 3 {
		for p := range int32(3) {
			e.Produce(records(name, p, 20, fmt.Sprint("run", run)))
		}
		e.sink(tbl, connector.Config{Topic: name})
	}
	return tbl
}

// fileOf returns a live data file of partition p whose rows start at low.
func fileOf(t *testing.T, tbl *snapshot.Table, p int32, low int64) snapshot.DataFile {
	t.Helper()
	files, err := tbl.Files(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.PartitionMin == p && f.Offsets.Low == low {
			return f
		}
	}
	t.Fatalf("no file of partition %d starting at %d among %+v", p, low, files)
	return snapshot.DataFile{}
}

// overwriteRows commits, as another writer would, an overwrite that adds
// nothing and deletes the rows filter matches.
func overwriteRows(t *testing.T, tbl *snapshot.Table, filter iceberg.BooleanExpression) {
	t.Helper()
	empty, err := array.NewRecordReader(tbl.ArrowSchema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.Iceberg().NewTransaction()
	if err := txn.Overwrite(t.Context(), empty, nil, table.WithOverwriteFilter(filter)); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestFaultFileRemovedByOverwrite: another writer's overwrite deletes
// rows floe committed, in an event table (one data file) and in a state
// table (every row of a partition).
func TestFaultFileRemovedByOverwrite(t *testing.T) {
	t.Run("event", func(t *testing.T) {
		e := newEnv(t)
		tbl := sunkTable(t, e, "over")
		f := fileOf(t, tbl, 1, 20)
		// A filter that matches exactly that file's rows deletes it.
		overwriteRows(t, tbl, iceberg.NewAnd(
			iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), int32(1)),
			iceberg.GreaterThanEqual(iceberg.Reference(mapping.ColOffset), f.Offsets.Low),
			iceberg.LessThan(iceberg.Reference(mapping.ColOffset), f.Offsets.High)))

		expectFindings(t, e.audit(tbl, ledgerOnly))
		rep := e.audit(tbl, filesDepth)
		expectFindings(t, rep, "files missing-file over/1 [20, 40)")
		if rep.Findings[0].File != f.Path {
			t.Fatalf("finding names %q, want the removed file %q", rep.Findings[0].File, f.Path)
		}
		expectFindings(t, e.audit(tbl, rowsDepth), "files missing-file over/1 [20, 40)", "rows count-mismatch over/1 [20, 40)")
		expectFindings(t, e.audit(tbl, contentDepth(e)), "files missing-file over/1 [20, 40)", "rows count-mismatch over/1 [20, 40)",
			"content missing-row over/1 [20, 40)")
	})
	t.Run("state", func(t *testing.T) {
		e := newEnv(t)
		tbl, recs := foldedTopic(t, e, "stateover")
		before, err := tbl.Files(e.Ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		overwriteRows(t, tbl, iceberg.EqualTo(iceberg.Reference(mapping.ColPartition), int32(0)))

		var removed []string
		for _, f := range before {
			removed = append(removed, "files missing-file stateover/0 "+f.Offsets.String())
		}
		expectFindings(t, e.audit(tbl, ledgerOnly))
		rep := e.audit(tbl, filesDepth)
		expectFindings(t, rep, removed...)
		if f := rep.Findings[0]; f.SnapshotID != tbl.Head().SnapshotID || !strings.Contains(f.Detail, "not a floe commit") {
			t.Fatalf("finding %+v, want the overwrite snapshot %d named", f, tbl.Head().SnapshotID)
		}
		expectFindings(t, e.audit(tbl, rowsDepth), removed...)
		// Every key's latest value is gone.
		want := slices.Clone(removed)
		for _, iv := range runs(stateOffsets(recs)) {
			want = append(want, "content missing-row stateover/0 "+iv.String())
		}
		expectFindings(t, e.audit(tbl, contentDepth(e)), want...)
	})
}

// writeFile writes rows as a Parquet data file in the table's location and
// returns its path; nothing is committed.
func writeFile(t *testing.T, tbl *snapshot.Table, rows arrow.RecordBatch) string {
	t.Helper()
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(rows, nil) }
	var path string
	for df, err := range table.WriteRecords(t.Context(), tbl.Iceberg(), tbl.ArrowSchema(), one) {
		if err != nil {
			t.Fatal(err)
		}
		path = df.FilePath()
	}
	return path
}

// tableKinds are the two kinds of floe table the audit checks: an event
// table (floe sink) and a state table (a fold), each with a partition 0 of
// the given topic, for faults that both must report alike.
var tableKinds = []struct {
	name  string
	build func(t *testing.T, e *env, topic string) *snapshot.Table
}{
	{"event", sunkTable},
	{"state", func(t *testing.T, e *env, topic string) *snapshot.Table {
		tbl, _ := foldedTopic(t, e, topic)
		return tbl
	}},
}

func TestFaultForeignFile(t *testing.T) {
	for _, k := range tableKinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t)
			topic := "foreign" + k.name
			tbl := k.build(t, e, topic)
			tp := mapping.TopicPartition{Topic: topic, Partition: 0}
			path := writeFile(t, tbl, batch(t, tbl, tp, span(1000, 1010)...))
			txn := tbl.Iceberg().NewTransaction()
			if err := txn.AddFiles(e.Ctx, []string{path}, nil, false); err != nil {
				t.Fatal(err)
			}
			if _, err := txn.Commit(e.Ctx); err != nil {
				t.Fatal(err)
			}

			expectFindings(t, e.audit(tbl, ledgerOnly))
			foreign := "files foreign-file " + topic + "/0 [1000, 1010)"
			rep := e.audit(tbl, filesDepth)
			expectFindings(t, rep, foreign)
			if f := rep.Findings[0]; f.File != path || !strings.Contains(f.Detail, "not a floe commit") {
				t.Fatalf("finding %+v, want file %s", f, path)
			}
			want := []string{foreign, "rows outside-ledger " + topic + "/0 [1000, 1010)"}
			expectFindings(t, e.audit(tbl, rowsDepth), want...)
			expectFindings(t, e.audit(tbl, contentDepth(e)), want...)
		})
	}
}

// TestFaultForeignTopic: another writer appends a file whose rows claim
// another topic, at partition numbers and offsets that floe's ranges hold
// too. The files level reports the file as foreign; the rows and content
// levels attribute its rows to the topic they name, outside the ledger,
// and find floe's own partitions whole: no duplicate, count or content
// finding on them, and their row counts are floe's rows only. They used
// to take every row for the ledger's one topic, reporting floe's offsets
// as duplicated and their content as altered.
func TestFaultForeignTopic(t *testing.T) {
	e := newEnv(t)
	tbl := sunkTable(t, e, "native")
	other := mapping.TopicPartition{Topic: "etl-backfill", Partition: 1}
	path := writeFile(t, tbl, batch(t, tbl, other, span(10, 20)...))
	txn := tbl.Iceberg().NewTransaction()
	if err := txn.AddFiles(e.Ctx, []string{path}, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	foreign := "files foreign-file native/1 [10, 20)"
	outside := "rows outside-ledger etl-backfill/1 [10, 20)"
	expectFindings(t, e.audit(tbl, filesDepth), foreign)
	expectFindings(t, e.audit(tbl, rowsDepth), foreign, outside)
	rep := e.audit(tbl, contentDepth(e))
	expectFindings(t, rep, foreign, outside)
	for _, p := range rep.Partitions {
		if p.Topic == "native" && p.Rows != 60 {
			t.Errorf("partition %s: %d rows, want floe's 60", p.TopicPartition, p.Rows)
		}
	}
}

// rewriteInPlace replaces the content of a committed data file, keeping
// its path, so that its manifest entry no longer describes it.
func rewriteInPlace(t *testing.T, tbl *snapshot.Table, f snapshot.DataFile, rows arrow.RecordBatch) {
	t.Helper()
	tmp := writeFile(t, tbl, rows)
	if err := os.Rename(strings.TrimPrefix(tmp, "file://"), strings.TrimPrefix(f.Path, "file://")); err != nil {
		t.Fatal(err)
	}
}

func TestFaultAlteredOffsets(t *testing.T) {
	e := newEnv(t)
	tbl := sunkTable(t, e, "altered")
	tp := mapping.TopicPartition{Topic: "altered", Partition: 2}
	f := fileOf(t, tbl, 2, 20)
	// Same row count; the last row claims offset 38 instead of 39.
	offsets := append(span(20, 39), 38)
	rewriteInPlace(t, tbl, f, batch(t, tbl, tp, offsets...))

	expectFindings(t, e.audit(tbl, ledgerOnly))
	expectFindings(t, e.audit(tbl, filesDepth))
	rep := e.audit(tbl, rowsDepth)
	expectFindings(t, rep,
		"rows duplicate altered/2 [38, 39)",
		"rows count-mismatch altered/2 [20, 40)",
		"rows file-content altered/2 [20, 39)")
	for _, fd := range rep.Findings {
		if fd.Kind == audit.KindFileContent && fd.File != f.Path {
			t.Fatalf("file-content finding names %q, want %q", fd.File, f.Path)
		}
	}
}

func TestFaultAlteredContent(t *testing.T) {
	e := newEnv(t)
	tbl := sunkTable(t, e, "edited")
	tp := mapping.TopicPartition{Topic: "edited", Partition: 0}
	f := fileOf(t, tbl, 0, 40)
	// Same offsets, other keys and values: only the content level sees it.
	rewriteInPlace(t, tbl, f, batch(t, tbl, tp, span(40, 60)...))
	expectFindings(t, e.audit(tbl, rowsDepth))
	expectFindings(t, e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker()}))
	rep := e.audit(tbl, audit.Options{Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep, "content content-mismatch edited/0 [40, 60)")
}

func TestFaultLossRecorded(t *testing.T) {
	e := newEnv(t)
	const topic = "lossy"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	tbl := e.Table("lake.lossy")
	e.sink(tbl, connector.Config{Topic: topic})
	e.Produce(records(topic, 0, 100, "b"))
	// Retention deletes [100, 150) before it was sunk; the sink records it.
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 150); err != nil {
		t.Fatal(err)
	}
	e.sink(tbl, connector.Config{Topic: topic, OnDataLoss: connector.LossRecord})

	for _, opts := range []audit.Options{ledgerOnly, filesDepth, rowsDepth, {Broker: e.Broker(), VerifyContent: true}} {
		rep := e.audit(tbl, opts)
		expectFindings(t, rep, "ledger lost lossy/0 [100, 150)")
		if p := rep.Partitions[0]; len(p.Lost) != 1 || p.Next != 200 {
			t.Fatalf("partition %+v", p)
		}
	}
}

// sinkOneAtATime sinks tbl with cfg through a client that fetches one
// record at a time, so that cfg.OnRecords can act between two records
// (delete some of them, as retention does) within one flush.
func (e *env) sinkOneAtATime(t *testing.T, tbl *snapshot.Table, cfg connector.Config) connector.Stats {
	t.Helper()
	slow, err := connector.Dial(e.Ctx, e.Stack.Brokers, 5*time.Second, kgo.FetchMaxPartitionBytes(1), kgo.FetchMaxBytes(1))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	stats, err := e.Env.Sink(slow, tbl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return stats
}

// onlyLosses checks that the audit of tbl at the files and rows levels
// finds the recorded losses of partition 0 of topic and nothing else, and
// that floe where names each of its first n offsets lost, a dead letter
// (dead) or a row in a file.
func (e *env) onlyLosses(t *testing.T, tbl *snapshot.Table, topic string, n int64, dead map[int]bool) {
	t.Helper()
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	c := mapping.Cover(l.Ranges(tp))
	var want []string
	for _, lost := range c.Lost {
		want = append(want, fmt.Sprintf("ledger lost %s %s", tp, lost))
	}
	for _, opts := range []audit.Options{filesDepth, rowsDepth} {
		expectFindings(t, e.audit(tbl, opts), want...)
	}
	for o := range n {
		res, err := lookup.Where(e.Ctx, tbl, nil, tp, o)
		if err != nil {
			t.Fatalf("where %d: %v", o, err)
		}
		switch {
		case slices.ContainsFunc(c.Lost, func(lost mapping.Interval) bool { return lost.Contains(o) }):
			if res.Status != "lost" {
				t.Errorf("where %d: %+v, want lost", o, res)
			}
		case dead[int(o)]:
			if res.Kind != "dead_letter" {
				t.Errorf("where %d: %+v, want a dead letter", o, res)
			}
		case res.Status != "row" || res.File == "":
			t.Errorf("where %d: %+v, want a row and its file", o, res)
		}
	}
}

// TestCleanLossInsideOneFlush: one flush holds rows of a partition, then a
// recorded loss, then more rows of the same partition. Its rows used to go
// into one data file whose offset bounds spanned the loss, and the files
// level reported a stray file and two count mismatches for a table that
// is exactly what its ledger says. The only finding is the loss, and no
// file spans it: when the rows after the loss are few (the partition's
// rows go to a lane, whose file group leaves the loss out), and when they
// fill a stream batch (the partition writes files of its own, the rows
// before the loss in one of them: found by review).
func TestCleanLossInsideOneFlush(t *testing.T) {
	for _, tc := range []struct {
		name        string
		after, size int // records after the first 10, and their value size
		lostTo      int64
	}{
		{name: "lane", after: 90, size: 0, lostTo: 50},
		{name: "stream", after: 60, size: 100 << 10, lostTo: 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			const topic = "midloss"
			e.Topic(topic, 1, nil)
			// One batch each: the sink reads them one fetch at a time.
			for i, r := range records(topic, 0, 10+tc.after, "a") {
				if i >= 10 && tc.size > 0 {
					r.Value = bytes.Repeat([]byte("x"), tc.size)
				}
				e.Produce([]*kgo.Record{r})
			}
			tbl := e.Table("lake.midloss")
			var once sync.Once
			stats := e.sinkOneAtATime(t, tbl, connector.Config{Topic: topic, StopAtEnd: true, OnDataLoss: connector.LossRecord,
				OnRecords: func(int64) {
					once.Do(func() {
						if err := e.Stack.Cluster.DeleteRecords(topic, 0, tc.lostTo); err != nil {
							t.Error(err)
						}
					})
				}})
			if stats.Commits != 2 { // the start, then everything in one flush
				t.Fatalf("%d commits, want the start and one flush", stats.Commits)
			}
			tp := mapping.TopicPartition{Topic: topic, Partition: 0}
			l, err := tbl.Ledger()
			if err != nil {
				t.Fatal(err)
			}
			c := mapping.Cover(l.Ranges(tp))
			if len(c.Lost) != 1 || c.Lost[0].High != tc.lostTo || c.Lost[0].Low == 0 || c.Next != int64(10+tc.after) {
				t.Fatalf("coverage %+v: want rows, a loss up to %d and rows up to %d", c, tc.lostTo, 10+tc.after)
			}
			// A lane's file may span the loss: its group's spans leave it out.
			files, err := tbl.Files(e.Ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if tc.size > 0 && f.Offsets.Low < c.Lost[0].Low && f.Offsets.High > c.Lost[0].High {
					t.Errorf("data file %s holds offsets %s, across the recorded loss %s", f.Path, f.Offsets, c.Lost[0])
				}
			}
			lost := fmt.Sprintf("ledger lost midloss/0 %s", c.Lost[0])
			for _, opts := range []audit.Options{filesDepth, rowsDepth, {Broker: e.Broker(), VerifyContent: true}} {
				expectFindings(t, e.audit(tbl, opts), lost)
			}
		})
	}
}

// TestCleanTwoLossesInsideOneFlush: a partition streams rows, loses
// offsets (its stream ends), reads a few rows, loses offsets again, then
// streams again, all in one flush. No data file spans a loss (the few
// rows between the losses used to go into the stream after the second),
// the audit finds the losses only, and floe where finds every row's file.
func TestCleanTwoLossesInsideOneFlush(t *testing.T) {
	e := newEnv(t)
	const topic = "twoloss"
	e.Topic(topic, 1, nil)
	big := func(o int) bool { return o < 50 || o >= 70 }
	for i, r := range records(topic, 0, 130, "a") {
		if big(i) {
			r.Value = bytes.Repeat([]byte("x"), 100<<10)
		}
		e.Produce([]*kgo.Record{r})
	}
	tbl := e.Table("lake.twoloss")
	var (
		mu           sync.Mutex
		seen         int64
		first, again bool
	)
	e.sinkOneAtATime(t, tbl, connector.Config{Topic: topic, StopAtEnd: true, OnDataLoss: connector.LossRecord,
		OnRecords: func(n int64) {
			mu.Lock()
			defer mu.Unlock()
			seen += n
			if !first && seen >= 45 {
				first = true
				if err := e.Stack.Cluster.DeleteRecords(topic, 0, 50); err != nil {
					t.Error(err)
				}
			}
			if first && !again && seen >= 55 {
				again = true
				if err := e.Stack.Cluster.DeleteRecords(topic, 0, 60); err != nil {
					t.Error(err)
				}
			}
		}})
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	c := mapping.Cover(l.Ranges(tp))
	if c.Next != 130 || len(c.Lost) == 0 {
		t.Fatalf("coverage %+v", c)
	}
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, lost := range c.Lost {
			if f.Offsets.Low < lost.Low && f.Offsets.High > lost.High {
				t.Errorf("data file %s holds offsets %s, across the recorded loss %s", f.Path, f.Offsets, lost)
			}
		}
	}
	e.onlyLosses(t, tbl, topic, 130, nil)
}

// TestCleanTypedLossInsideOneFlush: a JSON table with dead letters: rows
// and a dead letter before a recorded loss (no stream yet), then rows with
// a new wide column that fill a stream batch, and another dead letter, all
// in one flush. The rows before the loss used to share the stream's file;
// now the audit finds the loss only, and where finds every row's file and
// every dead letter.
func TestCleanTypedLossInsideOneFlush(t *testing.T) {
	e := newEnv(t)
	const topic = "typedloss"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TypedTable("lake.typedloss", mapping.Layout{Value: mapping.ValueJSON})
	pad := strings.Repeat("p", 100<<10)
	bad := map[int]bool{3: true, 40: true}
	for i := range 80 {
		v := fmt.Sprintf(`{"id":%d}`, i)
		if i >= 12 {
			v = fmt.Sprintf(`{"id":%d,"pad":"%s"}`, i, pad)
		}
		if bad[i] {
			v = `{"id":"x"}`
		}
		e.Produce([]*kgo.Record{{Topic: topic, Value: []byte(v)}})
	}
	var (
		once sync.Once
		seen atomic.Int64
	)
	e.sinkOneAtATime(t, tbl, connector.Config{Topic: topic, StopAtEnd: true, OnDataLoss: connector.LossRecord, DeadLetters: dlq,
		OnRecords: func(n int64) {
			if seen.Add(n) >= 6 {
				once.Do(func() {
					if err := e.Stack.Cluster.DeleteRecords(topic, 0, 12); err != nil {
						t.Error(err)
					}
				})
			}
		}})
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if c := mapping.Cover(l.Ranges(mapping.TopicPartition{Topic: topic, Partition: 0})); len(c.Lost) != 1 || c.Next != 80 {
		t.Fatalf("coverage %+v: want one loss and rows up to 80", c)
	}
	e.onlyLosses(t, tbl, topic, 80, bad)
}

func TestFaultLossUnrecorded(t *testing.T) {
	e := newEnv(t)
	const topic = "gone"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	tbl := e.Table("lake.gone")
	e.sink(tbl, connector.Config{Topic: topic})
	e.Produce(records(topic, 0, 100, "b"))
	// Deleted before any sink run saw them: only the broker can tell.
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 150); err != nil {
		t.Fatal(err)
	}
	expectFindings(t, e.audit(tbl, rowsDepth))
	rep := e.audit(tbl, audit.Options{Broker: e.Broker()})
	expectFindings(t, rep, "broker unrecorded-loss gone/0 [100, 150)")
	if b := rep.Partitions[0].Broker; b.Lag != 50 || b.LogStart != 150 {
		t.Fatalf("broker state %+v, want lag 50 from log start 150", b)
	}
}

func TestFaultUnseenPartition(t *testing.T) {
	e := newEnv(t)
	const topic = "grown"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 30, "a"))
	e.Produce(records(topic, 1, 30, "a"))
	tbl := e.Table("lake.grown")
	e.sink(tbl, connector.Config{Topic: topic})
	// A third partition appears and receives records the table never saw;
	// a fourth stays empty, which is not a finding.
	resp, err := kadm.NewClient(e.Broker().Client()).CreatePartitions(e.Ctx, 2, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	e.Produce(records(topic, 2, 5, "new"))

	expectFindings(t, e.audit(tbl, rowsDepth))
	rep := e.audit(tbl, audit.Options{Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep, "broker unseen-partition grown/2 [0, 5)")
	if n := len(rep.Partitions); n != 4 {
		t.Fatalf("%d partitions in the report, want 4", n)
	}
}

func TestBadInputNoLedger(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.empty")
	_, err := audit.Run(e.Ctx, tbl, audit.Options{})
	var nl *audit.NoLedgerError
	if !errors.As(err, &nl) || nl.Snapshots != 0 {
		t.Fatalf("never written: err %v, want a NoLedgerError", err)
	}
	// Written by a plain Iceberg append, not by floe.
	txn := tbl.Iceberg().NewTransaction()
	rows := batch(t, tbl, mapping.TopicPartition{Topic: "t", Partition: 0}, 0, 1, 2)
	tab := array.NewTableFromRecords(tbl.ArrowSchema(), []arrow.RecordBatch{rows})
	defer tab.Release()
	if err := txn.AppendTable(e.Ctx, tab, 10, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	_, err = audit.Run(e.Ctx, tbl, audit.Options{})
	if !errors.Is(err, audit.ErrNoLedger) || !strings.Contains(err.Error(), "not written by floe") {
		t.Fatalf("foreign table: err %v", err)
	}
	// A dead-letter table is named as one, with the table to audit
	// instead (it was called not written by floe; from a new-user run).
	_, dlq := e.TableWithDeadLetters("lake.withdlq", snapshot.OpenOptions{Create: true})
	_, err = audit.Run(e.Ctx, dlq, audit.Options{})
	if !errors.Is(err, audit.ErrNoLedger) || !strings.Contains(err.Error(), "is the dead-letter table of lake.withdlq") || !strings.Contains(err.Error(), "audit lake.withdlq") {
		t.Fatalf("dead-letter table: err %v", err)
	}
}

func TestBadInputMalformedLedger(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.malformed")
	commit(t, tbl, mapping.TopicPartition{Topic: "t", Partition: 0}, 0, 3, span(0, 3))
	txn := tbl.Iceberg().NewTransaction()
	props := iceberg.Properties{
		mapping.KeyVersion:            mapping.LedgerVersion,
		mapping.KeyCommitID:           "3b1f0c2e-hand-edited",
		mapping.KeyRangesPrefix + "t": "0:3-oops:2",
	}
	if err := txn.AddFiles(e.Ctx, nil, props, false); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	_, err := audit.Run(e.Ctx, tbl, audit.Options{})
	var me *mapping.MalformedError
	if !errors.As(err, &me) || me.Key != mapping.KeyRangesPrefix+"t" {
		t.Fatalf("err %v, want a MalformedError naming %s", err, mapping.KeyRangesPrefix+"t")
	}
}

func TestBadInputOptions(t *testing.T) {
	e := newEnv(t)
	tbl := e.Table("lake.opts")
	commit(t, tbl, mapping.TopicPartition{Topic: "t", Partition: 0}, 0, 3, span(0, 3))
	if _, err := audit.Run(e.Ctx, tbl, audit.Options{Topic: "other"}); !errors.Is(err, audit.ErrTopicNotInLedger) {
		t.Fatalf("unknown topic: err %v", err)
	}
	if _, err := audit.Run(e.Ctx, tbl, audit.Options{VerifyContent: true}); err == nil || !strings.Contains(err.Error(), "Options.Broker") {
		t.Fatalf("content without broker: err %v", err)
	}
	// A topic the broker does not have: every partition is a finding, not
	// an error.
	rep := e.audit(tbl, audit.Options{Broker: e.Broker()})
	expectFindings(t, rep, "broker missing-partition t/0")
	if !strings.Contains(rep.Findings[0].Detail, "does not exist on the broker") {
		t.Fatalf("detail %q", rep.Findings[0].Detail)
	}
}

// TestFaultHoleOnDeleteTopic: offsets inside the retained log without a
// record are "compacted" only when the topic's cleanup.policy includes
// compact. The log here has such holes (compacted while the policy was
// compact); once the policy is delete, nothing explains them and the
// content level reports them, with or without rows.
func TestFaultHoleOnDeleteTopic(t *testing.T) {
	e := newEnv(t)
	const topic = "events"
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	produce := func(key string) { // one batch each: compaction keeps the last batch
		e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(key), Value: []byte(key)}})
	}
	tbl := e.Table("lake.events")
	produce("u0")                               // 0, unique: the log start stays 0
	produce("k1")                               // 1, superseded by 2 before it is sunk
	produce("k1")                               // 2
	produce("a")                                // 3
	e.Stack.Cluster.Compact()                   // removes 1
	e.sink(tbl, connector.Config{Topic: topic}) // rows 0, 2, 3
	produce("k2")                               // 4, sunk, then superseded by 5
	e.sink(tbl, connector.Config{Topic: topic}) // row 4
	produce("k2")                               // 5
	produce("z")                                // 6
	e.Stack.Cluster.Compact()                   // removes 4
	e.sink(tbl, connector.Config{Topic: topic}) // rows 5, 6

	content := audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true}
	rep := e.audit(tbl, content)
	expectFindings(t, rep)
	if c := contentTotals(rep); c.Verified != 5 || c.Compacted != 1 || c.Unverifiable != 1 {
		t.Fatalf("compact topic: content %+v, want 5 verified, offset 1 compacted, the row at 4 unverifiable", c)
	}

	del := "delete"
	resp, err := kadm.NewClient(e.Broker().Client()).AlterTopicConfigs(e.Ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: &del}}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	rep = e.audit(tbl, content)
	expectFindings(t, rep, "content unclassified-hole events/0 [1, 2)", "content unclassified-hole events/0 [4, 5)")
	if c := contentTotals(rep); c.Verified != 5 || c.Compacted != 0 || c.Unverifiable != 1 {
		t.Fatalf("delete topic: content %+v, want 5 verified, nothing compacted, the row at 4 unverifiable", c)
	}
	for _, f := range rep.Findings {
		if !strings.Contains(f.Detail, `cleanup.policy "delete"`) {
			t.Errorf("finding %s does not name the cleanup.policy: %s", f.Offsets, f.Detail)
		}
	}
}

// TestFaultUnrecordedStart: a partition whose first sunk offset lies inside
// the retained log, with no start recorded there (a --start latest sink of
// a floe that did not record starts, whose restart may have skipped
// records), is not complete: the broker level says which offsets were
// never sunk.
func TestFaultUnrecordedStart(t *testing.T) {
	e := newEnv(t)
	const topic = "late"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 30, "a"))
	tbl := e.Table("lake.late")
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	forceCommit(t, tbl, tp, 20, 30, span(20, 30))
	expectFindings(t, e.audit(tbl, rowsDepth))
	expectFindings(t, e.audit(tbl, audit.Options{Broker: e.Broker()}), "broker unrecorded-start late/0 [0, 20)")
}

// TestCleanStartLatest: a sink started with --start latest records where
// it started, so the retained offsets before that are a note, not a
// finding.
func TestCleanStartLatest(t *testing.T) {
	e := newEnv(t)
	const topic = "fresh"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 20, "old"))
	tbl := e.Table("lake.fresh")
	e.sink(tbl, connector.Config{Topic: topic, Start: connector.StartLatest})
	e.Produce(records(topic, 0, 10, "new"))
	e.sink(tbl, connector.Config{Topic: topic, Start: connector.StartLatest})
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	expectFindings(t, rep)
	if p := rep.Partitions[0]; !p.Started || p.First != 20 || p.Next != 30 {
		t.Fatalf("partition %+v: want a recorded start at 20 and next 30", p)
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "records that the sink began fresh/0 at offset 20") }) {
		t.Fatalf("notes %q: want one about the recorded start", rep.Notes)
	}
	// The verdict does not claim the offsets before the start (from a
	// new-user run: "every offset ... is accounted for").
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if want := "verdict: COMPLETE, every offset of 1 partition, from where the sink began it, is accounted for by the ledger, the file list, the data files' rows and the log's records, up to the end of the log"; !strings.Contains(strings.Join(strings.Fields(text.String()), " "), want) {
		t.Fatalf("text report lacks %q:\n%s", want, text.String())
	}
}

// TestFaultTopicRecreated: the topic was deleted and recreated, and the new
// one holds more records than the ledger's next offset, so nothing about
// the offsets gives it away: the topic ID does.
func TestFaultTopicRecreated(t *testing.T) {
	e := newEnv(t)
	const topic = "again"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	tbl := e.Table("lake.again")
	e.sink(tbl, connector.Config{Topic: topic})
	if err := e.Stack.Cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 80, "b"))
	expectFindings(t, e.audit(tbl, rowsDepth))
	rep := e.audit(tbl, audit.Options{Broker: e.Broker()})
	expectFindings(t, rep, "broker topic-recreated")
	// The partition is not called complete against another log's
	// watermarks (from a new-user run).
	if p := rep.Partitions[0]; p.Findings != 1 {
		t.Errorf("partition %s: %d findings; want it counted under the topic's", p.TopicPartition, p.Findings)
	}
}

// TestFaultFileDeletedFromStorage (from a new-user run): a data file of
// the current snapshot deleted from the storage (not from the table) is a
// missing-file finding of the rows level, and the content level goes on
// (its rows are missing), where both failed the audit with "file does not
// exist" and wrote no report.
func TestFaultFileDeletedFromStorage(t *testing.T) {
	e := newEnv(t)
	tbl := sunkTable(t, e, "lostfile")
	f := fileOf(t, tbl, 1, 0)
	if err := os.Remove(strings.TrimPrefix(f.Path, "file://")); err != nil {
		t.Fatal(err)
	}
	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker(), VerifyContent: true})
	missing := slices.ContainsFunc(rep.Findings, func(fd audit.Finding) bool {
		return fd.Level == audit.LevelRows && fd.Kind == audit.KindMissingFile && fd.File == f.Path
	})
	if rep.Complete() || !missing {
		t.Fatalf("findings %+v; want the rows level's missing-file of %s", rep.Findings, f.Path)
	}
}

// retopicTable sinks table retopic, then rewrites in place, behind floe's
// back, its data file of partition 0 at offset 40: the same rows but that
// kafka_topic names topic ghost at offsets [40, 60).
func retopicTable(t *testing.T, e *env) *snapshot.Table {
	t.Helper()
	const name = "retopic"
	tbl := sunkTable(t, e, name)
	f := fileOf(t, tbl, 0, 40)
	rb, err := mapping.NewRowBuilder(memory.NewGoAllocator(), tbl.ArrowSchema())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range records(name, 0, 20, "run2") {
		r.Topic, r.Offset = "ghost", int64(40+i)
		rb.Append(r)
	}
	rows := rb.NewBatch()
	rb.Release()
	rewriteInPlace(t, tbl, f, rows)
	return tbl
}

// TestRowsTopicColumnAltered: a data file of a one-topic table is
// rewritten in place behind floe's back, the same in every column but
// kafka_topic, which names another topic. Those records are no longer
// rows of their topic (floe where says the table lost them, a query by
// topic misses them): the rows level reads the topic column of every
// table, and finds them outside the ledger and the range short (the
// audit called the table complete at every level; from a review).
func TestRowsTopicColumnAltered(t *testing.T) {
	e := newEnv(t)
	tbl := retopicTable(t, e)
	for _, opts := range []audit.Options{{Depth: audit.DepthRows}, contentDepth(e)} {
		rep := e.audit(tbl, opts)
		got := findings(rep)
		want := []string{"rows count-mismatch retopic/0 [40, 60)", "rows outside-ledger ghost/0 [40, 60)"}
		if opts.VerifyContent {
			// The content level finds the topic's records there
			// without rows, as it does those of a file gone.
			want = append([]string{"content missing-row retopic/0 [40, 60)"}, want...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: findings %q, want %q", opts, got, want)
		}
	}
}

// TestRecreatedTopicBeforeFirstID (from a review): the first commits of a table
// recorded no topic ID (a floe of ledger version 1, or brokers without
// topic IDs); the topic is then deleted and recreated, and a sink resumes
// from the ledger's next offset on the new topic, recording its ID from
// then on. The new topic's offsets [0, 50) were never sunk: the table's
// rows there are the deleted topic's records. The ledger now records one
// topic ID, the broker's, and the audit with --brokers (and, once
// retention deleted the new topic's head, with --verify-content) calls
// the table complete, without even the note it gives a ledger that
// records no ID at all.
func TestRecreatedTopicBeforeFirstID(t *testing.T) {
	e := newEnv(t)
	const topic = "reborn"
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "old"))
	tbl := e.Table("lake.reborn")
	// What an old floe (or a broker without topic IDs) committed: the
	// ranges, no topic ID.
	commit(t, tbl, tp, 0, 50, span(0, 50))
	if err := e.Stack.Cluster.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 80, "new"))
	e.sink(tbl, connector.Config{Topic: topic})

	rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows, Broker: e.Broker()})
	t.Logf("rows+broker: findings %q notes %q", findings(rep), rep.Notes)
	noted := slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "topic ID") })
	if rep.Complete() && !noted {
		t.Errorf("audit --deep --brokers: complete, no note, though %s [0, 50) of the topic on the brokers was never sunk (the rows there are the deleted topic's)", tp)
	}
	// Retention deletes the new topic's head: its unsunk records are gone.
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 60); err != nil {
		t.Fatal(err)
	}
	rep = e.audit(tbl, contentDepth(e))
	t.Logf("content: findings %q notes %q", findings(rep), rep.Notes)
	noted = slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "topic ID") })
	if rep.Complete() && !noted {
		t.Errorf("audit --deep --brokers --verify-content: complete, no note, though %s [0, 50) of the topic on the brokers was never sunk", tp)
	}
}

// TestDeadLetterTopicColumnAltered: as TestRowsTopicColumnAltered,
// but the file rewritten behind floe's back is the dead-letter table's:
// same path, rows, partitions and offsets, kafka_topic naming another
// topic. Those dead letters are no longer the topic's (a query of the
// dead-letter table by topic misses them), yet the rows level of a
// one-topic table took every dead letter's topic from the ledger and
// called the table complete (from a review).
func TestDeadLetterTopicColumnAltered(t *testing.T) {
	e := newEnv(t)
	e.Topic("orders", 1, nil)
	tbl, dlq := e.TypedTable("lake.orders", mapping.Layout{Value: mapping.ValueJSON})
	jsonLog(e, "orders", `{"id":1}`, ``, `{"id":2}`, ``, `{"id":3}`)
	e.sink(tbl, connector.Config{Topic: "orders", DeadLetters: dlq})
	if rep := e.audit(tbl, audit.Options{Depth: audit.DepthRows}); !rep.Complete() {
		t.Fatalf("before the rewrite: %+v", rep.Findings)
	}
	files, err := dlq.Files(t.Context(), 0)
	if err != nil || len(files) != 1 {
		t.Fatalf("dead-letter files %+v: %v", files, err)
	}
	var rows arrow.RecordBatch
	err = dlq.ScanFiles(t.Context(), dlq.Head().SnapshotID, snapshot.ScanOptions{}, func(fb snapshot.FileBatch) error {
		if fb.Done {
			return nil
		}
		b := fb.Batch
		idx := b.Schema().FieldIndices(mapping.ColTopic)[0]
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		for range b.NumRows() {
			sb.Append("ghost")
		}
		cols := slices.Clone(b.Columns())
		cols[idx] = sb.NewArray()
		rows = array.NewRecordBatch(b.Schema(), cols, b.NumRows())
		return nil
	})
	if err != nil || rows == nil {
		t.Fatalf("read the dead letters: %v", err)
	}
	rewriteInPlace(t, dlq, files[0], rows)
	for _, opts := range []audit.Options{{Depth: audit.DepthRows}, contentDepth(e)} {
		if rep := e.audit(tbl, opts); rep.Complete() {
			t.Errorf("%+v: the dead letters now name topic ghost, and the audit calls lake.orders complete", opts)
		}
	}
}
