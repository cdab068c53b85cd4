package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewS62DiffUpsertGroupModel (review of the diff 13219fd..HEAD):
// the model of TestReviewS62UpsertModelAcrossPartitions over 8 partitions,
// so that a flush's small partitions (more than 4) share files recorded
// as one file group of the ledger. Keys in several partitions, tombstones,
// keyless dead letters, tied timestamps, and flushes in which some
// partitions hold only tombstones or only dead letters (no row, so no
// span), random flush sizes and a compaction every other round. The table
// must be the independent fold at its head and at commit boundaries (as-of),
// and the audit (rows, content) must find nothing.
func TestReviewS62DiffUpsertGroupModel(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { s62DiffGroupModel(t, seed) })
	}
}

func s62DiffGroupModel(t *testing.T, seed uint64) {
	e := newEnv(t)
	const topic, parts = "s62groups", 8
	e.Topic(topic, parts, nil)
	tbl, dlq := e.upsertTable("lake.s62groups")
	rng := rand.New(rand.NewPCG(6262, seed))
	log := map[int32][]s62Rec{}
	base := time.Unix(1_700_000_000, 0)
	n := 0
	for round := range 6 {
		var recs []*kgo.Record
		for range 60 + rng.IntN(60) {
			n++
			p := int32(rng.IntN(parts))
			var k, v *string
			switch {
			case p == 7 && round%2 == 0:
				// A partition of tombstones only this round.
				k = ptr(fmt.Sprintf("k%d", rng.IntN(9)))
			case p == 6 && round%3 == 0:
				// A partition of dead letters only this round.
			default:
				if rng.IntN(20) != 0 {
					k = ptr(fmt.Sprintf("k%d", rng.IntN(9)))
				}
				if rng.IntN(6) != 0 {
					v = ptr(fmt.Sprintf("v%d-p%d", n, p))
				}
			}
			ts := base.Add(time.Duration(round*10+rng.IntN(6)) * time.Second)
			r := &kgo.Record{Topic: topic, Partition: p, Timestamp: ts}
			if k != nil {
				r.Key = []byte(*k)
			}
			if v != nil {
				r.Value = []byte(*v)
			}
			recs = append(recs, r)
			log[p] = append(log[p], s62Rec{key: k, value: v, ts: ts})
		}
		e.Produce(recs)
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 40 + rng.IntN(60), DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 && round < 5 { // the last round's groups stay live
			if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	groups := fileGroups(l)
	if groups == 0 {
		t.Fatalf("no commit of %d recorded a file group: the test does not reach the shared files", len(l.Commits))
	}
	t.Logf("%d file groups", groups)
	s62Check(t, e, tbl, log)
	s62DiffWhereEvery(t, e, tbl, topic, log)
}

// s62DiffWhereEvery asks floe where for every offset of log: each key's
// winning record (its value is the key's row at the head) must be a row,
// in a file of the table's head, and each record without a key a dead
// letter; no lookup may fail.
func s62DiffWhereEvery(t *testing.T, e *env, tbl *snapshot.Table, topic string, log map[int32][]s62Rec) {
	t.Helper()
	head := latestRows(t, tbl)
	live := map[string]bool{}
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		live[f.Path] = true
	}
	statuses := map[string]int{}
	for p, recs := range log {
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		for off, r := range recs {
			res, err := lookup.Where(e.Ctx, tbl, e.Dial(), tp, int64(off))
			if err != nil {
				t.Fatalf("where %s@%d: %v", tp, off, err)
			}
			statuses[res.Status+"/"+res.Kind]++
			switch {
			case r.key == nil:
				if res.Status != lookup.StatusNoRow || res.Kind != lookup.KindDeadLetter {
					t.Errorf("where %s@%d (no key): %s/%s, want a dead letter: %s", tp, off, res.Status, res.Kind, res.Explanation)
				}
			case r.value != nil && head[*r.key] == *r.value:
				if res.Status != lookup.StatusRow || !live[res.File] {
					t.Errorf("where %s@%d (key %s's row at the head): %s/%s in %q: %s", tp, off, *r.key, res.Status, res.Kind, res.File, res.Explanation)
				}
			}
		}
	}
	t.Logf("where: %v", statuses)
}

// TestReviewS62DiffDebeziumGroupTruncatePartitioned (review of the diff
// 13219fd..HEAD): a Debezium table keyed by id, partitioned by
// bucket(3, id), sunk from 6 Kafka partitions (each id in partition
// id%6) in flushes whose small partitions share a file group split by
// the spec into several files. The second flush holds updates, deletes
// with their tombstones, and a truncate in partition 0 followed by new
// rows there: the commit replaces every live file (the first commit's
// group files among them) and keeps the flush's other partitions' rows
// and partition 0's rows after the truncate. The table must be that state
// before and after a compaction, and the audit (rows, content) must find
// nothing.
func TestReviewS62DiffDebeziumGroupTruncatePartitioned(t *testing.T) {
	e := newEnv(t)
	const topic, parts = "dbserver1.inventory.s62trunc", 6
	e.Topic(topic, parts, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	pb, err := mapping.ParsePartitionBy("bucket(3, id)")
	if err != nil {
		t.Fatal(err)
	}
	tbl, dlq := e.TableWithDeadLetters("lake.s62trunc", snapshot.OpenOptions{Create: true, Layout: cdcLayout(t, floetest.CDCPlainJSON),
		Mode: mapping.ModeUpsert, Key: &key, PartitionBy: &pb})
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
	sec := 0
	ev := func(op string, id int, email string) *kgo.Record {
		sec++
		r := dbzEvent(topic, op, id, email, sec)
		r.Partition = int32(id % parts)
		return r
	}
	want := map[int64]string{}
	var recs []*kgo.Record
	for id := 1; id <= 60; id++ {
		recs = append(recs, ev("c", id, fmt.Sprintf("%d@a", id)))
		want[int64(id)] = fmt.Sprintf("%d@a", id)
	}
	e.Produce(recs)
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if got := dbzState(t, tbl); !maps.Equal(got, want) {
		t.Fatalf("after the inserts: got %v, want %v", got, want)
	}
	// The second flush: the truncate empties the table; what stays is this
	// flush's rows of partitions 1-5 and partition 0's after the truncate.
	clear(want)
	recs = nil
	for id := 1; id <= 60; id++ {
		if id%parts == 0 {
			continue
		}
		switch id % 5 {
		case 0:
			recs = append(recs, ev("d", id, fmt.Sprintf("%d@a", id)), ev("-", id, ""))
		case 1, 3:
			recs = append(recs, ev("u", id, fmt.Sprintf("%d@b", id)))
			want[int64(id)] = fmt.Sprintf("%d@b", id)
		}
	}
	recs = append(recs, ev("u", 6, "6@b"), ev("u", 12, "12@b"))
	tr := dbzTruncate(topic, sec+1)
	sec++
	recs = append(recs, tr, ev("c", 18, "18@c"), ev("c", 24, "24@c"), ev("u", 18, "18@d"))
	want[18], want[24] = "18@d", "24@c"
	e.Produce(recs)
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	groups := fileGroups(l)
	for _, c := range l.Commits {
		t.Logf("commit %d: %v groups %+v", c.SnapshotID, c.Ranges, c.FileGroups)
	}
	if groups < 2 {
		t.Fatalf("%d file groups in %d commits, want the two flushes' groups", groups, len(l.Commits))
	}
	if got := dbzState(t, tbl); !maps.Equal(got, want) {
		t.Fatalf("after the truncate: got %v\nwant %v", got, want)
	}
	auditComplete(t, e, tbl)
	// floe where --key finds every key's row in a live file of the second
	// commit's group; a key the truncate removed is deleted; floe files
	// shows the group's files as one group.
	last := l.Commits[len(l.Commits)-1]
	for id := range want {
		kr, err := lookup.WhereKey(e.Ctx, tbl, e.Dial(), fmt.Sprintf(`{"id":%d}`, id))
		if err != nil || kr.Status != lookup.KeyStatusRow || !slices.ContainsFunc(last.FileGroups, func(g mapping.FileGroup) bool { return slices.Contains(g.Files, kr.File) }) {
			t.Errorf("where --key id=%d: %+v (%v), want its row in the last commit's group", id, kr, err)
		}
	}
	if kr, err := lookup.WhereKey(e.Ctx, tbl, e.Dial(), `{"id":30}`); err != nil || kr.Status != lookup.KeyStatusDeleted {
		t.Errorf("where --key id=30 (removed by the truncate): %+v (%v), want deleted", kr, err)
	}
	fr, err := lookup.Files(e.Ctx, tbl, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fr.Files {
		if f.Group == nil || len(f.Group.Spans) != parts {
			t.Errorf("floe files: %s has group %+v, want the last commit's group of %d spans", f.Path, f.Group, parts)
		}
	}
	// One more update, of id 18 only: its delete file is in id 18's bucket,
	// so the compaction rewrites that bucket's file of the group and
	// leaves the others' (the group is then partly live).
	e.Produce([]*kgo.Record{ev("u", 18, "18@e")})
	want[18] = "18@e"
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	whereRows := func(when string) {
		t.Helper()
		live := map[string]bool{}
		files, err := tbl.Files(e.Ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			live[f.Path] = true
		}
		for id := range want {
			kr, err := lookup.WhereKey(e.Ctx, tbl, e.Dial(), fmt.Sprintf(`{"id":%d}`, id))
			if err != nil || kr.Status != lookup.KeyStatusRow || kr.Partition == nil || kr.Offset == nil || !live[kr.File] {
				t.Errorf("%s: where --key id=%d: %+v (%v), want its row in a live file", when, id, kr, err)
				continue
			}
			res, err := lookup.Where(e.Ctx, tbl, e.Dial(), mapping.TopicPartition{Topic: topic, Partition: *kr.Partition}, *kr.Offset)
			if err != nil || res.Status != lookup.StatusRow || res.File != kr.File {
				t.Errorf("%s: where %d@%d (id %d's row, in %s): %+v (%v)", when, *kr.Partition, *kr.Offset, id, kr.File, res, err)
			}
		}
	}
	whereRows("before the compaction")
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	if got := dbzState(t, tbl); !maps.Equal(got, want) {
		t.Fatalf("after the compaction: got %v\nwant %v", got, want)
	}
	live := 0
	files, err := tbl.Files(e.Ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if slices.ContainsFunc(last.FileGroups, func(g mapping.FileGroup) bool { return slices.Contains(g.Files, f.Path) }) {
			live++
		}
	}
	t.Logf("after the compaction, %d of the group's %d files are live", live, len(last.FileGroups[0].Files))
	whereRows("after the compaction")
	auditComplete(t, e, tbl)
}

// TestReviewS62DiffUpsertGroupWithLoss (review of the diff 13219fd..HEAD):
// the grouped flush with a recorded loss (TestSinkGroupedFlushWithLoss)
// on an upsert table: partition 0 loses offsets [n, 30) to retention after
// the sink read some of its records, in a flush whose 8 small partitions
// share a file group. The group's spans of partition 0 must leave the loss
// out, the table must be the fold of the ranges that are not lost, and the
// audit (rows, content) must find the loss and nothing else.
func TestReviewS62DiffUpsertGroupWithLoss(t *testing.T) {
	for attempt := 1; !s62DiffUpsertGroupWithLoss(t); attempt++ {
		if attempt == 3 {
			t.Fatalf("in %d runs the fetches never reached partition 0 before the deletion", attempt)
		}
	}
}

func s62DiffUpsertGroupWithLoss(t *testing.T) bool {
	e := newEnv(t)
	const topic, partitions = "s62lossy", 8
	e.Topic(topic, partitions, nil)
	tbl, dlq := e.upsertTable("lake.s62lossy")
	log := map[int32][]s62Rec{}
	base := time.Unix(1_700_000_000, 0)
	for p := range int32(partitions) {
		var recs []*kgo.Record
		for i := range 40 {
			k, v := fmt.Sprintf("k%d", (i*7+int(p))%13), fmt.Sprintf("v%d-%d", p, i)
			ts := base.Add(time.Duration(i) * time.Second)
			var vp *string
			if i%9 != 8 {
				vp = &v
			}
			r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Timestamp: ts}
			if vp != nil {
				r.Value = []byte(*vp)
			}
			recs = append(recs, r)
			log[p] = append(log[p], s62Rec{key: &k, value: vp, ts: ts})
		}
		e.produceOneByOne(recs)
	}
	lost, c, ok := sinkLosingPartition0(t, e, tbl, connector.Config{Topic: topic, DeadLetters: dlq}, 0)
	if !ok {
		return false
	}
	tp0 := mapping.TopicPartition{Topic: topic, Partition: 0}
	l := mustLedger(t, tbl)
	for _, s := range c.FileGroups[0].Spans {
		if s.TopicPartition == tp0 && s.Low < lost.High && lost.Low < s.High {
			t.Errorf("partition 0 span %s of the group overlaps the loss %s", s.Interval, lost.Interval)
		}
	}
	state := map[string]string{}
	for _, cc := range l.Commits {
		s62Fold(state, log, cc)
	}
	if got := latestRows(t, tbl); !maps.Equal(got, state) {
		t.Errorf("table %v\nfold  %v", got, state)
	}
	rep, err := audit.Run(e.Ctx, e.OpenTable(tbl.Name(), snapshot.OpenOptions{}), audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	sawLost := false
	for _, f := range rep.Findings {
		if f.Kind == audit.KindLost {
			sawLost = true
			continue
		}
		t.Errorf("audit finding: %s %s %s %s: %s", f.Level, f.Kind, f.Partition, f.Offsets, f.Detail)
	}
	if !sawLost {
		t.Errorf("the audit did not report the loss: %+v", rep.Findings)
	}
	return true
}

// TestReviewS62DiffUpsertGroupMembersFileGroups (review of the diff
// 13219fd..HEAD): TestReviewS62UpsertGroupKeysAcrossMembers over 8
// partitions with flushes large enough that a member's small partitions
// share a file group: members join and leave (cooperative revocations
// commit what was consumed) while keys spread over partitions two members
// own. The table must be the fold over the ledger's commits at its head
// and at boundaries, and the audit must find nothing.
func TestReviewS62DiffUpsertGroupMembersFileGroups(t *testing.T) {
	e := newEnv(t)
	tbl, log := s62GroupMembers(t, e, s62GroupRun{name: "s62dgroup", parts: 8, keys: 15, seed: 8, flushRecords: 60,
		flushInterval: 300 * time.Millisecond, batch: 30, pause: 100 * time.Millisecond})
	l := mustLedger(t, tbl)
	groups := fileGroups(l)
	if groups == 0 {
		t.Fatalf("no commit of %d recorded a file group: the test does not reach the shared files", len(l.Commits))
	}
	t.Logf("%d commits, %d file groups", len(l.Commits), groups)
	s62Check(t, e, tbl, log)
}

// TestReviewS62DiffTypedUpsertGroupEvolves (review of the diff
// 13219fd..HEAD): a JSON upsert table keyed by the Kafka key over 6
// partitions, whose values gain a column and then a nested one mid-flush,
// so that a flush's small partitions' batches have several Arrow schemas
// (the group is written as runs of one schema each), with tombstones, a
// conflicting value (a dead letter) and keys in several partitions. The
// rows must be the fold, the audit (rows, content) must find nothing.
func TestReviewS62DiffTypedUpsertGroupEvolves(t *testing.T) {
	e := newEnv(t)
	const topic, parts = "s62dtyped", 6
	e.Topic(topic, parts, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	tbl, dlq := e.TableWithDeadLetters("lake.s62dtyped", snapshot.OpenOptions{Create: true,
		Layout: mapping.Layout{Key: mapping.KeyString, Value: mapping.ValueJSON}, Mode: mapping.ModeUpsert, Key: &key})
	base := time.Unix(1_700_000_000, 0)
	n := 0
	want := map[string]string{}
	rec := func(p int32, k, v string, n2 string) *kgo.Record {
		n++
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Timestamp: base.Add(time.Duration(n) * time.Second)}
		switch v {
		case "-":
			delete(want, k)
		case "bad":
			r.Value = []byte(`{"n":"not a number"}`)
			return r
		default:
			r.Value = []byte(v)
			want[k] = n2
		}
		return r
	}
	var flushes [][]*kgo.Record
	var f1 []*kgo.Record
	for p := range int32(parts) {
		for i := range 3 {
			k := fmt.Sprintf("k%d", (int(p)+i)%8)
			v := fmt.Sprint(int(p)*10 + i)
			f1 = append(f1, rec(p, k, fmt.Sprintf(`{"n":%s}`, v), v))
		}
	}
	flushes = append(flushes, f1)
	var f2 []*kgo.Record
	for p := range int32(parts) {
		k := fmt.Sprintf("k%d", (int(p)+3)%8)
		v := fmt.Sprint(100 + p)
		switch p % 3 {
		case 0:
			f2 = append(f2, rec(p, k, fmt.Sprintf(`{"n":%s,"tag":"t%d"}`, v, p), v))
		case 1:
			f2 = append(f2, rec(p, k, fmt.Sprintf(`{"n":%s}`, v), v), rec(p, fmt.Sprintf("k%d", p), "-", ""))
		case 2:
			f2 = append(f2, rec(p, k, fmt.Sprintf(`{"n":%s,"nested":{"x":%d}}`, v, p), v), rec(p, "k7", "bad", ""))
		}
		f2 = append(f2, rec(p, fmt.Sprintf("k%d", (int(p)+5)%8), fmt.Sprintf(`{"n":%d}`, 200+p), fmt.Sprint(200+p)))
	}
	flushes = append(flushes, f2)
	for _, recs := range flushes {
		e.Produce(recs)
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
	}
	l := mustLedger(t, tbl)
	groups := 0
	for _, c := range l.Commits {
		for _, g := range c.FileGroups {
			groups++
			t.Logf("group of %d files, %d spans", len(g.Files), len(g.Spans))
		}
	}
	if groups < 2 {
		t.Fatalf("%d file groups in %d commits, want one per flush", groups, len(l.Commits))
	}
	got := map[string]string{}
	for _, r := range rows(t, tbl) {
		got[r.Key] = r.Columns["n"]
	}
	if !maps.Equal(got, want) {
		t.Errorf("table %v, want %v", got, want)
	}
	auditComplete(t, e, tbl)
}

// TestReviewS62DiffUpsertGroupsUnderColumnChurn (review of the diff
// 13219fd..HEAD): TestSinksProgressUnderColumnChurn on an upsert table.
// Two live sinks of 6 partitions each of one JSON upsert table keyed by
// the Kafka key, whose records each add a field, about every 20 ms per
// partition: each flush's small partitions share a file group. A commit
// whose group was written for a schema the other writer changed before it
// committed writes its files again for the new schema and records their
// new names in its ledger: no flush is read again (ErrSchemaMoved; the
// review found 11 in a run, and 20 in a row stop a sink for good). Both
// sinks keep up, and the table holds each key's last value.
func TestReviewS62DiffUpsertGroupsUnderColumnChurn(t *testing.T) {
	e := newEnv(t)
	const topic, parts = "s62churn", 12
	e.Topic(topic, parts, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	opts := snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString, Value: mapping.ValueJSON}, Mode: mapping.ModeUpsert, Key: &key}
	tbl, _ := e.TableWithDeadLetters("lake.s62churn", opts)
	var stops [2]func() (connector.Stats, error)
	var moved atomic.Int64
	for w := range 2 {
		own, ownDLQ := e.TableWithDeadLetters("lake.s62churn", opts)
		var ps []int32
		for p := range int32(parts / 2) {
			ps = append(ps, int32(w)*parts/2+p)
		}
		stops[w] = e.runLive(own, connector.Config{Topic: topic, Partitions: ps, FlushInterval: 20 * time.Millisecond, DeadLetters: ownDLQ,
			Logger: slog.New(&s62Count{moved: &moved})})
	}
	const n = 60
	want := map[string]string{}
	for i := range n {
		var recs []*kgo.Record
		for p := range int32(parts) {
			k := fmt.Sprintf("p%d-k%d", p, i%5)
			v := fmt.Sprintf(`{"id":%d,"f%d_%d":%d}`, i, p, i, i)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: []byte(v)})
			want[k] = fmt.Sprint(i)
		}
		e.Produce(recs)
		time.Sleep(20 * time.Millisecond)
	}
	for p := range int32(parts) {
		waitForNext(t, e, "lake.s62churn", mapping.TopicPartition{Topic: topic, Partition: p}, n)
	}
	for w, stop := range stops {
		if _, err := stop(); err != nil {
			t.Fatalf("sink %d: %v", w, err)
		}
	}
	got := map[string]string{}
	for _, r := range rows(t, tbl) {
		got[r.Key] = r.Columns["id"]
	}
	if !maps.Equal(got, want) {
		t.Errorf("table %v\nwant  %v", got, want)
	}
	l := mustLedger(t, tbl)
	groups := fileGroups(l)
	t.Logf("%d commits, %d file groups", len(l.Commits), groups)
	if n := moved.Load(); n > 0 {
		t.Errorf("%d flushes were read again (ErrSchemaMoved), want their files written again", n)
	}
}

// s62Count counts the sink's warnings that a flush is read again because
// another writer's schema change moved under its files.
type s62Count struct{ moved *atomic.Int64 }

func (h *s62Count) Enabled(context.Context, slog.Level) bool { return true }
func (h *s62Count) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "reading them again for the new schema") {
		h.moved.Add(1)
	}
	return nil
}
func (h *s62Count) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *s62Count) WithGroup(string) slog.Handler      { return h }
