package connector_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// s62Rec is one produced record of the review's model: nil key or value
// as produced.
type s62Rec struct {
	key, value *string
	ts         time.Time
}

// s62Fold applies the documented winner rule of docs/upsert.md to the
// records of one commit (its ranges of log): within a partition the
// highest offset; across partitions, among each partition's latest record
// of the key, the later timestamp, then the higher partition; a record
// without a key is a dead letter and changes no row. state is changed in
// place.
func s62Fold(state map[string]string, log map[int32][]s62Rec, c mapping.Commit) {
	type cand struct {
		p   int32
		off int64
		r   s62Rec
	}
	latest := map[string]map[int32]cand{}
	for _, rg := range c.Ranges {
		if rg.Deleted() {
			continue
		}
		for off := rg.Low; off < rg.High; off++ {
			r := log[rg.Partition][off]
			if r.key == nil {
				continue
			}
			if latest[*r.key] == nil {
				latest[*r.key] = map[int32]cand{}
			}
			if q, ok := latest[*r.key][rg.Partition]; !ok || off > q.off {
				latest[*r.key][rg.Partition] = cand{rg.Partition, off, r}
			}
		}
	}
	for k, per := range latest {
		var win *cand
		for _, c := range per {
			c := c
			if win == nil || c.r.ts.After(win.r.ts) || (c.r.ts.Equal(win.r.ts) && c.p > win.p) {
				win = &c
			}
		}
		if win.r.value == nil {
			delete(state, k)
		} else {
			state[k] = *win.r.value
		}
	}
}

// s62Snapshot reads snapshot id of an upsert table keyed by the Kafka key
// (as text) with iceberg-go's scan (deletes applied): key -> value.
func s62Snapshot(t *testing.T, tbl *snapshot.Table, id int64) map[string]string {
	t.Helper()
	_, it, err := tbl.Iceberg().Scan(table.WithSnapshotID(id)).ToArrowRecords(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for b, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		ki, vi := b.Schema().FieldIndices(mapping.ColKey)[0], b.Schema().FieldIndices(mapping.ColValue)[0]
		val := b.Column(vi).(*array.Binary)
		for i := range int(b.NumRows()) {
			k := b.Column(ki).ValueStr(i)
			if kb, ok := b.Column(ki).(*array.Binary); ok {
				k = string(kb.Value(i))
			}
			if _, dup := out[k]; dup {
				t.Fatalf("snapshot %d: key %q has two rows", id, k)
			}
			out[k] = string(val.Value(i))
		}
		b.Release()
	}
	return out
}

// TestReviewS62UpsertModelAcrossPartitions (review s62): keys produced
// into three partitions at once (a producer that does not partition by
// key), with tombstones, records without a key (dead letters) and
// timestamps that often tie across partitions, sunk in rounds with
// flushes of random sizes and a compaction after every other round. An
// independent fold of the log over the ledger's commits, by the rule
// docs/upsert.md states (not mapping.Winner, which sink and audit share),
// must equal the table at its head and at every commit boundary that
// floe as-of names; the audit (rows, content) must find nothing.
func TestReviewS62UpsertModelAcrossPartitions(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { s62UpsertModel(t, seed) })
	}
}

func s62UpsertModel(t *testing.T, seed uint64) {
	e := newEnv(t)
	const topic, parts = "s62moved", 3
	e.Topic(topic, parts, nil)
	tbl, dlq := e.upsertTable("lake.s62moved")
	rng := rand.New(rand.NewPCG(62, seed))
	log := map[int32][]s62Rec{}
	base := time.Unix(1_700_000_000, 0)
	n := 0
	for round := range 6 {
		var recs []*kgo.Record
		for range 30 + rng.IntN(30) {
			n++
			p := int32(rng.IntN(parts))
			var k, v *string
			if rng.IntN(20) != 0 {
				k = ptr(fmt.Sprintf("k%d", rng.IntN(7)))
			}
			if rng.IntN(6) != 0 {
				v = ptr(fmt.Sprintf("v%d-p%d", n, p))
			}
			// Few distinct seconds: ties across partitions are common,
			// and a partition's later record may carry an earlier time.
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
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 3 + rng.IntN(25), DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 {
			if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p := range int32(parts) {
		if got := e.endOffsets(topic)[mapping.TopicPartition{Topic: topic, Partition: p}]; got != int64(len(log[p])) {
			t.Fatalf("partition %d ends at %d, the model holds %d records", p, got, len(log[p]))
		}
	}
	s62Check(t, e, tbl, log)
}

// s62Check checks upsert table tbl, keyed by the Kafka key, against the
// fold of log (s62Fold) over its ledger's commits: at the head and at
// every third commit boundary through floe as-of; and audits it (rows,
// content) expecting nothing.
func s62Check(t *testing.T, e *env, tbl *snapshot.Table, log map[int32][]s62Rec) {
	t.Helper()
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]string{}
	ends := map[int32]int64{}
	checked := 0
	for i, c := range l.Commits {
		s62Fold(state, log, c)
		for _, r := range c.Ranges {
			ends[r.Partition] = max(ends[r.Partition], r.High)
		}
		if i%3 != 2 && i != len(l.Commits)-1 {
			continue
		}
		// The state at this commit's boundary, as floe as-of gives it.
		var cut string
		for _, p := range slices.Sorted(maps.Keys(ends)) {
			if cut != "" {
				cut += ","
			}
			cut += fmt.Sprintf("%d=%d", p, ends[p])
		}
		res, err := lookup.AsOf(e.Ctx, tbl, nil, lookup.AsOfQuery{Offsets: cut})
		if err != nil {
			t.Fatalf("as-of %s: %v", cut, err)
		}
		if res.Exact == nil || !*res.Exact {
			t.Errorf("as-of %s (a commit boundary): not exact: %+v", cut, res)
			continue
		}
		if got := s62Snapshot(t, tbl, res.SnapshotID); !maps.Equal(got, state) {
			t.Errorf("as-of %s (after commit %d, snapshot %d): table %v\nmodel %v", cut, i, res.SnapshotID, got, state)
		}
		checked++
	}
	if got := latestRows(t, tbl); !maps.Equal(got, state) {
		t.Errorf("head: table %v\nmodel %v", got, state)
	}
	rep, err := audit.Run(e.Ctx, e.OpenTable(tbl.Name(), snapshot.OpenOptions{}), audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("audit finding: %s %s %s %s: %s", f.Level, f.Kind, f.Partition, f.Offsets, f.Detail)
	}
	t.Logf("%d commits, %d boundaries checked, %d keys at the head", len(l.Commits), checked, len(state))
}

// TestReviewS62UpsertGroupKeysAcrossMembers (review s62): the model of
// TestReviewS62UpsertModelAcrossPartitions with the partitions sunk by a
// consumer group whose members come and go while records arrive: a key's
// records lie in partitions two members own, so which record wins depends
// on which member commits last ("the record of the later commit wins").
// The ledger orders the commits whoever made them: the table must be the
// fold of the log over the ledger's commits, at its head and at each
// boundary, and the audit must find nothing.
func TestReviewS62UpsertGroupKeysAcrossMembers(t *testing.T) {
	e := newEnv(t)
	tbl, log := s62GroupMembers(t, e, s62GroupRun{name: "s62group", parts: 4, keys: 9, seed: 62, flushRecords: 7, batch: 15, pause: 150 * time.Millisecond})
	s62Check(t, e, tbl, log)
}

// s62GroupRun is a run of s62GroupMembers: the topic, table and group
// names, its partitions, the keys its records draw from, the random
// seed, the members' flush settings (a zero interval: the default), and
// how many records each round produces, a round every pause.
type s62GroupRun struct {
	name          string
	parts, keys   int
	seed          uint64
	flushRecords  int
	flushInterval time.Duration
	batch         int
	pause         time.Duration
}

// s62GroupMembers runs two consumer-group members of an upsert table
// keyed by the Kafka key: member a sinks alone, then b joins, then a
// leaves while records keep coming (keys spread over partitions the two
// own), until the ledger reaches the log's end. It returns the table and
// the log produced, by partition.
func s62GroupMembers(t *testing.T, e *env, run s62GroupRun) (*snapshot.Table, map[int32][]s62Rec) {
	t.Helper()
	topic, table, group := run.name, "lake."+run.name, "floe-"+run.name
	e.Topic(topic, int32(run.parts), nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	opts := snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString}, Mode: mapping.ModeUpsert, Key: &key}
	rng := rand.New(rand.NewPCG(62, run.seed))
	log := map[int32][]s62Rec{}
	base := time.Unix(1_700_000_000, 0)
	n := 0
	produce := func() {
		var recs []*kgo.Record
		for range run.batch {
			n++
			p := int32(rng.IntN(run.parts))
			k := ptr(fmt.Sprintf("k%d", rng.IntN(run.keys)))
			var v *string
			if rng.IntN(5) != 0 {
				v = ptr(fmt.Sprintf("v%d-p%d", n, p))
			}
			ts := base.Add(time.Duration(n/25+rng.IntN(3)) * time.Second)
			r := &kgo.Record{Topic: topic, Partition: p, Timestamp: ts, Key: []byte(*k)}
			if v != nil {
				r.Value = []byte(*v)
			}
			recs = append(recs, r)
			log[p] = append(log[p], s62Rec{key: k, value: v, ts: ts})
		}
		e.Produce(recs)
	}
	rounds := func(count int) {
		for range count {
			produce()
			time.Sleep(run.pause)
		}
	}
	member := func() *member {
		tbl, dlq := e.TableWithDeadLetters(table, opts)
		cfg := groupConfig(topic, group)
		cfg.DeadLetters = dlq
		cfg.FlushRecords = run.flushRecords
		if run.flushInterval > 0 {
			cfg.FlushInterval = run.flushInterval
		}
		return e.startMemberOn(tbl, cfg)
	}
	a := member()
	rounds(10)
	b := member()
	rounds(20)
	statsA := a.halt(t)
	rounds(10)
	waitLedger(t, e, table, e.endOffsets(topic), 90*time.Second)
	statsB := b.halt(t)
	if statsA.Records == 0 || statsB.Records == 0 {
		t.Fatalf("a member sank nothing: %d and %d rows", statsA.Records, statsB.Records)
	}
	t.Logf("members: %d and %d rows, %d and %d rebalances", statsA.Records, statsB.Records, statsA.Rebalances, statsB.Rebalances)
	return e.OpenTable(table, snapshot.OpenOptions{}), log
}

// TestReviewS62TypedUpsertEvolvesAudited (review s62): a JSON upsert
// table keyed by the Kafka key whose values gain a column, then a nested
// one, mid-flush and across flushes, with tombstones and a value that
// conflicts with its column (a dead letter, whose key keeps its row), keys
// in two partitions: the content audit, which decodes each record again
// into the table's current columns, finds every row equal to its record
// and the table equal to the fold of the log.
func TestReviewS62TypedUpsertEvolvesAudited(t *testing.T) {
	e := newEnv(t)
	const topic = "s62typed"
	e.Topic(topic, 2, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	tbl, dlq := e.TableWithDeadLetters("lake.s62typed", snapshot.OpenOptions{Create: true,
		Layout: mapping.Layout{Key: mapping.KeyString, Value: mapping.ValueJSON}, Mode: mapping.ModeUpsert, Key: &key})
	base := time.Unix(1_700_000_000, 0)
	n := 0
	rec := func(p int32, k, v string) *kgo.Record {
		n++
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Timestamp: base.Add(time.Duration(n) * time.Second)}
		if v != "-" {
			r.Value = []byte(v)
		}
		return r
	}
	batches := [][]*kgo.Record{
		{rec(0, "a", `{"n":1}`), rec(1, "b", `{"n":2}`), rec(0, "c", `{"n":3}`)},
		// A column mid-flush, a tombstone, a key in the other partition.
		{rec(0, "a", `{"n":4,"tag":"x"}`), rec(1, "c", `{"n":5}`), rec(0, "b", "-"), rec(1, "a", `{"n":6}`)},
		// A conflicting value (a string into long n): a dead letter; c keeps its row.
		{rec(1, "c", `{"n":"seven"}`), rec(0, "d", `{"n":8,"nested":{"x":1}}`), rec(1, "b", `{"n":9,"tag":"y"}`)},
		{rec(0, "d", "-"), rec(1, "d", `{"n":10,"nested":{"x":2,"y":"z"}}`), rec(0, "a", `{"n":11}`)},
	}
	for i, b := range batches {
		e.Produce(b)
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 2 + i, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for _, r := range rows(t, tbl) {
		got[r.Key] = r.Columns["n"]
	}
	want := map[string]string{"a": "11", "b": "9", "c": "5", "d": "10"}
	if !maps.Equal(got, want) {
		t.Errorf("table %v, want %v", got, want)
	}
	rep, err := audit.Run(e.Ctx, e.OpenTable(tbl.Name(), snapshot.OpenOptions{}), audit.Options{Depth: audit.DepthRows, Broker: e.Dial(), VerifyContent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("audit finding: %s %s %s %s: %s", f.Level, f.Kind, f.Partition, f.Offsets, f.Detail)
	}
	verified := int64(0)
	for _, p := range rep.Partitions {
		if p.Content != nil {
			verified += p.Content.Verified
		}
	}
	if verified == 0 {
		t.Errorf("the content level verified no row: %+v", rep.Partitions)
	}
}
