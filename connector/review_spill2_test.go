package connector_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// review2JSON returns n JSON records of partition p, every 7th malformed
// (a dead letter), timestamps an hour apart over 3 hours.
func review2JSON(topic string, p int32, n int, tag string) []*kgo.Record {
	out := make([]*kgo.Record, n)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		v := fmt.Appendf(nil, `{"id":%d,"p":%d,"tag":%q,"pad":"%-60s"}`, i, p, tag, "x")
		if i%7 == 3 {
			v = []byte("oops not json")
		}
		out[i] = &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "k%d", i%5), Value: v,
			Timestamp: base.Add(time.Duration(i%3) * time.Hour)}
	}
	return out
}

// TestReview2SpillTypedDeadLettersPartitioned: a JSON table partitioned by
// hour(kafka_timestamp), with a dead-letter table, whose 20 partitions hold
// malformed records among good ones; the spill lane moves rows at every
// row. The table and its dead-letter table must hold every offset once,
// the audit be complete, and floe where find rows in the lane's files.
func TestReview2SpillTypedDeadLettersPartitioned(t *testing.T) {
	for _, spill := range []int64{1, 4 << 10} {
		t.Run(fmt.Sprint(spill), func(t *testing.T) {
			e := newEnv(t)
			topic := fmt.Sprintf("r2typed%d", spill)
			const partitions, per = 20, 300
			e.Topic(topic, partitions, nil)
			var recs []*kgo.Record
			for p := range int32(partitions) {
				recs = append(recs, review2JSON(topic, p, per, "a")...)
			}
			e.Produce(recs)
			pb, err := mapping.ParsePartitionBy("hour(kafka_timestamp)")
			if err != nil {
				t.Fatal(err)
			}
			tbl, dlq := e.TableWithDeadLetters(fmt.Sprintf("lake.r2typed%d", spill), snapshot.OpenOptions{Create: true,
				Layout: mapping.Layout{Value: mapping.ValueJSON}, PartitionBy: &pb})
			s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(),
				DeadLetters: dlq, FlushRecords: len(recs), FlushInterval: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			connector.SetSpillBytes(s, spill)
			if _, err := s.Run(e.Ctx); err != nil {
				t.Fatal(err)
			}
			want := e.endOffsets(topic)
			if err := tbl.Refresh(e.Ctx); err != nil {
				t.Fatal(err)
			}
			floetest.CheckWithDeadLetters(t, tbl, dlq, want)
			auditComplete(t, e, tbl)
			l := mustLedger(t, tbl)
			groups := fileGroups(l)
			t.Logf("%d commits, %d file groups", len(l.Commits), groups)
			whereFinds(t, e, tbl, mapping.TopicPartition{Topic: topic, Partition: partitions - 1}, 0, per-1)
		})
	}
}

// TestReview2SpillAbortedInLane: transactions aborted in the middle of
// laned partitions: an aborted range inside a laned partition's flush
// (read_committed skips it, no loss), with spill at every row.
func TestReview2SpillAbortedInLane(t *testing.T) {
	e := newEnv(t)
	const topic, partitions = "r2aborted", 12
	e.Topic(topic, partitions, nil)
	for p := range int32(partitions) {
		e.Produce(paddedRecords(topic, p, 50, "a"))
	}
	for p := range int32(partitions) {
		e.Txn(fmt.Sprintf("tx-%d", p), paddedRecords(topic, p, 30, "aborted"), false)
	}
	for p := range int32(partitions) {
		e.Produce(paddedRecords(topic, p, 50, "b"))
	}
	tbl := e.Table("lake.r2aborted")
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(),
		FlushRecords: 1_000_000, FlushInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	connector.SetSpillBytes(s, 1)
	if _, err := s.Run(e.Ctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, tbl, e.endOffsets(topic))
	auditComplete(t, e, tbl)
	l := mustLedger(t, tbl)
	for _, c := range l.Commits {
		for _, g := range c.FileGroups {
			t.Logf("group of %d files, %d spans", len(g.Files), len(g.Spans))
		}
	}
}

// review2DeadLetterRun sinks topic into a fresh JSON table with a
// dead-letter table in what would be one flush, the spill lane at spill
// bytes, checks every offset once in one of the tables, and returns the
// commits and how far the live heap rose above where it was before the
// sink started (sampled after a GC every 2 MiB of records consumed; the
// fetched records in hand make it noisy).
func review2DeadLetterRun(t *testing.T, e *env, topic, table string, spill int64) (commits int, grew int64) {
	t.Helper()
	tbl, dlq := e.TypedTable(table, mapping.Layout{Value: mapping.ValueJSON})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapAlloc)
	var peak, since int64
	sample := func() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, int64(ms.HeapAlloc))
	}
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(),
		DeadLetters: dlq, FlushRecords: 10_000_000, FlushBytes: 1 << 30, FlushInterval: time.Hour,
		OnConsumed: func(_ int, b int64) {
			if since += b; since >= 2<<20 {
				since = 0
				sample()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	connector.SetSpillBytes(s, spill)
	if _, err := s.Run(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	floetest.CheckWithDeadLetters(t, tbl, dlq, e.endOffsets(topic))
	return len(mustLedger(t, tbl).Commits), peak - base
}

// TestReview2DeadLettersEscapeSpill: the spill lane bounds what the rows of
// partitions without a stream of their own hold (docs/sinking.md: "Memory
// does not follow the flush thresholds or the number of partitions"), and
// dead letters, which wait for the commit, end a flush at the spill bytes
// (session.deadBytes). Before, they counted toward the held rows instead,
// which the spill then zeroed without moving them: a topic of 19 MiB of
// malformed records sunk in one flush held all of them (in 2 commits: the
// start's and the flush's).
func TestReview2DeadLettersEscapeSpill(t *testing.T) {
	e := newEnv(t)
	// Records of 200 bytes: a poll (at most 10,000 records) takes about
	// 2 MiB, and the flush ends after the poll that reaches the spill.
	const partitions, per, size = 20, 5000, 200
	pad := strings.Repeat("x", size)
	for _, bad := range []bool{false, true} {
		topic := fmt.Sprintf("r2dlmem-%v", bad)
		e.Topic(topic, partitions, nil)
		var recs []*kgo.Record
		for p := range int32(partitions) {
			for i := range per {
				v := fmt.Appendf(nil, `{"i":%d,"pad":%q}`, i, pad)
				if bad {
					v = fmt.Appendf(nil, `oops %d %s`, i, pad)
				}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: v})
			}
		}
		e.Produce(recs)
	}
	const spill = 1 << 20
	goodCommits, good := review2DeadLetterRun(t, e, "r2dlmem-false", "lake.r2dlmem_good", spill)
	badCommits, bad := review2DeadLetterRun(t, e, "r2dlmem-true", "lake.r2dlmem_bad", spill)
	payload := partitions * per * size
	t.Logf("valid records: %d commits, heap rose %.1f MiB; malformed: %d commits, %.1f MiB (%.1f MiB of records each)",
		goodCommits, float64(good)/(1<<20), badCommits, float64(bad)/(1<<20), float64(payload)/(1<<20))
	if want := 5; badCommits < want {
		t.Fatalf("%d MiB of malformed records with the spill at 1 MiB made %d commits, want at least %d: dead letters are held past the spill bytes",
			payload>>20, badCommits, want)
	}
	if goodCommits > 2 {
		t.Errorf("valid records made %d commits, want the one flush (and the start's)", goodCommits)
	}
}

// TestReview2SpillBoundedEnds: a replay-like run (start and end offsets)
// whose partitions reach their end offsets in the middle of a flush with
// every row moved to the spill lane, some ending in a transaction marker,
// with flushes cut by records (97) so that lanes of many flushes hold
// pieces of each partition.
func TestReview2SpillBoundedEnds(t *testing.T) {
	e := newEnv(t)
	const topic, partitions = "r2ends", 12
	e.Topic(topic, partitions, nil)
	for p := range int32(partitions) {
		e.Produce(paddedRecords(topic, p, 60, "a"))
	}
	for p := range int32(partitions) {
		e.Txn(fmt.Sprintf("tx-%d", p), paddedRecords(topic, p, 5, "t"), p%2 == 0)
	}
	for p := range int32(partitions) {
		e.Produce(paddedRecords(topic, p, 60, "b"))
	}
	starts, ends := map[int32]int64{}, map[int32]int64{}
	want := map[mapping.TopicPartition]int64{}
	for p := range int32(partitions) {
		starts[p] = int64(p)
		ends[p] = 30 + int64(p)*8 // some end inside the transaction or at its marker
		want[mapping.TopicPartition{Topic: topic, Partition: p}] = ends[p]
	}
	for _, flush := range []int{97, 1_000_000} {
		tbl := e.Table(fmt.Sprintf("lake.r2ends_%d", flush))
		s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, Logger: quietLogger(),
			StartOffsets: starts, EndOffsets: ends, FlushRecords: flush, FlushInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		connector.SetSpillBytes(s, 1)
		if _, err := s.Run(e.Ctx); err != nil {
			t.Fatal(err)
		}
		l := mustLedger(t, tbl)
		next := l.Next()
		for tp, n := range want {
			if next[tp] != n {
				t.Errorf("flush %d: %s next %d, want %d", flush, tp, next[tp], n)
			}
		}
		seen := map[mapping.TopicPartition]map[int64]bool{}
		for _, r := range rows(t, tbl) {
			if seen[r.TP] == nil {
				seen[r.TP] = map[int64]bool{}
			}
			if seen[r.TP][r.Offset] || r.Offset < starts[r.TP.Partition] || r.Offset >= ends[r.TP.Partition] {
				t.Fatalf("flush %d: row %s@%d duplicated or outside [%d, %d)", flush, r.TP, r.Offset, starts[r.TP.Partition], ends[r.TP.Partition])
			}
			seen[r.TP][r.Offset] = true
		}
		rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			t.Errorf("flush %d: audit finding %s %s: %s", flush, f.Level, f.Kind, f.Detail)
		}
		groups := fileGroups(l)
		t.Logf("flush %d: %d commits, %d file groups", flush, len(l.Commits), groups)
	}
}
