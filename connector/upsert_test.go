package connector_test

import (
	"bufio"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// upsertTable creates the upsert table name keyed by the Kafka key as
// text (--mode upsert --key string), with its dead-letter table.
func (e *env) upsertTable(name string) (tbl, dlq *snapshot.Table) {
	e.T.Helper()
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	return e.TableWithDeadLetters(name, snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString},
		Mode: mapping.ModeUpsert, Key: &key})
}

// keyed is a record of key k (nil: no key) and value v (nil: a
// tombstone) at second ts.
func keyed(topic string, p int32, k, v *string, ts int) *kgo.Record {
	r := &kgo.Record{Topic: topic, Partition: p, Timestamp: time.Unix(int64(1_700_000_000+ts), 0)}
	if k != nil {
		r.Key = []byte(*k)
	}
	if v != nil {
		r.Value = []byte(*v)
	}
	return r
}

func ptr(s string) *string { return &s }

// latestRows reads an upsert table with iceberg-go's scan (equality
// deletes applied) as key -> value, failing on a key seen twice.
func latestRows(t *testing.T, tbl *snapshot.Table) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, r := range rows(t, tbl) {
		if _, dup := got[r.Key]; dup {
			t.Fatalf("key %q has two rows", r.Key)
		}
		got[r.Key] = r.Value
	}
	return got
}

// TestUpsertStringKey sinks keyed records with updates, tombstones and a
// record without a key through kfake into an upsert table keyed by the
// Kafka key, in several flushes, and reads it back with iceberg-go's scan,
// which applies the equality deletes: exactly the latest value of every
// key whose latest record is not a tombstone. The ledger counts the rows,
// deletes and dead letters of every offset.
func TestUpsertStringKey(t *testing.T) {
	e := newEnv(t)
	const topic = "accounts"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable("lake.accounts")
	if tbl.Mode() != mapping.ModeUpsert || tbl.Iceberg().Metadata().Version() != 2 {
		t.Fatalf("mode %s, format v%d", tbl.Mode(), tbl.Iceberg().Metadata().Version())
	}
	if ids := tbl.Iceberg().Schema().IdentifierFieldIDs; len(ids) != 1 {
		t.Fatalf("identifier fields %v", ids)
	}
	want := map[string]string{}
	var recs []*kgo.Record
	var deletes, dead int64
	for i := range 60 {
		k := fmt.Sprintf("k%d", i%7)
		switch {
		case i%11 == 10:
			recs = append(recs, keyed(topic, 0, nil, ptr("no key"), i))
			dead++
		case i%9 == 8:
			recs = append(recs, keyed(topic, 0, &k, nil, i))
			delete(want, k)
			deletes++
		default:
			v := fmt.Sprintf("v%d", i)
			recs = append(recs, keyed(topic, 0, &k, &v, i))
			want[k] = v
		}
	}
	e.Produce(recs)
	stats, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 13, DeadLetters: dlq})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Commits < 4 {
		t.Fatalf("%d commits, want several flushes", stats.Commits)
	}
	got := latestRows(t, tbl)
	if !maps.Equal(got, want) {
		t.Fatalf("table %v\nwant  %v", got, want)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	c := mapping.Cover(l.Ranges(tp))
	if c.Next != 60 || c.Records+c.Deletes+c.DeadLetters != 60 || c.Deletes != deletes || c.DeadLetters != dead || len(c.Gaps)+len(c.Overlaps) > 0 {
		t.Fatalf("coverage %+v: want 60 offsets, %d deletes, %d dead letters", c, deletes, dead)
	}
	if n := len(rows(t, dlq)); int64(n) != dead {
		t.Fatalf("%d dead letters, want %d", n, dead)
	}
	keys := slices.Sorted(maps.Keys(got))
	t.Logf("%d keys left: %v", len(keys), keys)
}

// TestUpsertSurvivesSIGKILL kills an upsert sink process at random points
// (consuming, writing files, committing), restarts it each time, and
// checks after every kill and at the end that the table, read with
// iceberg-go's scan, is exactly the fold of the log over the ledger's
// ranges: each key's latest value as of the ledger's next offsets, keys
// whose latest record is a tombstone absent, and every offset counted
// once as a row, a delete or a dead letter.
func TestUpsertSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs many processes")
	}
	e := newEnv(t)
	const topic, table = "ucrash", "lake.ucrash"
	e.Topic(topic, 2, nil)
	tbl, _ := e.upsertTable(table)
	var log [2][]*kgo.Record
	produce := func(n int) {
		for p := range int32(2) {
			var recs []*kgo.Record
			for range n {
				i := len(log[p])
				// Keys are of one partition each, so the fold is per
				// partition; a tenth are tombstones, a few have no key.
				k, v := fmt.Sprintf("p%d-k%d", p, i%97), fmt.Sprintf("v%d", i)
				r := keyed(topic, p, &k, &v, i)
				switch {
				case i%10 == 9:
					r.Value = nil
				case i%31 == 30:
					r.Key = nil
				}
				recs = append(recs, r)
				log[p] = append(log[p], r)
			}
			e.Produce(recs)
		}
	}
	// fold is the table the ledger's next offsets promise.
	fold := func(next map[mapping.TopicPartition]int64) map[string]string {
		want := map[string]string{}
		for p := range int32(2) {
			for _, r := range log[p][:next[mapping.TopicPartition{Topic: topic, Partition: p}]] {
				switch {
				case r.Key == nil:
				case r.Value == nil:
					delete(want, string(r.Key))
				default:
					want[string(r.Key)] = string(r.Value)
				}
			}
		}
		return want
	}
	check := func() {
		t.Helper()
		if err := tbl.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		l := mustLedger(t, tbl)
		for tp, next := range l.Next() {
			c := mapping.Cover(l.Ranges(tp))
			if len(c.Gaps)+len(c.Overlaps) > 0 || c.Records+c.Deletes+c.DeadLetters != next-c.First {
				t.Fatalf("%s: coverage %+v", tp, c)
			}
		}
		if got, want := latestRows(t, tbl), fold(l.Next()); !maps.Equal(got, want) {
			t.Fatalf("table after a kill: %d keys, want %d (the fold of the ledger's ranges)", len(got), len(want))
		}
	}
	produce(1500)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10 {
		cmd := e.childCmdFrom(topic, table, 100+rng.IntN(300), true, connector.StartEarliest, "")
		cmd.Env = append(cmd.Env, "FLOE_TEST_MODE=upsert")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		sc.Scan() // the first records are consumed
		go func() {
			for sc.Scan() {
			}
		}()
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		check()
		produce(200 + rng.IntN(300))
	}
	cmd := e.childCmdFrom(topic, table, 1000, true, connector.StartEarliest, "")
	cmd.Env = append(cmd.Env, "FLOE_TEST_MODE=upsert")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	check()
	if next := mustLedger(t, tbl).Next(); next[mapping.TopicPartition{Topic: topic, Partition: 1}] != int64(len(log[1])) {
		t.Fatalf("final run ended at %v, want the end of the log", next)
	}
}

// TestUpsertGroupTypedEvolution sinks JSON values into an upsert table
// keyed by the value column id (--id-columns id) with two members of a
// consumer group: the second member's arrival and the first's departure
// move partitions between them, and a new value column (vip) appears
// mid-stream. The table ends as the fold of the log: each id's latest
// value, with the new column.
func TestUpsertGroupTypedEvolution(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "people", "lake.people", "floe-people"
	e.Topic(topic, 4, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromValue, Columns: []string{"id"}}
	opts := snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Value: mapping.ValueJSON}, Mode: mapping.ModeUpsert, Key: &key}
	want := map[string]string{}
	n := 0
	produce := func(withVIP bool) {
		for p := range int32(4) {
			var recs []*kgo.Record
			for range 40 {
				id := int(p)*1000 + n%23
				v := fmt.Sprintf(`{"id":%d,"name":"n%d"}`, id, n)
				if withVIP {
					v = fmt.Sprintf(`{"id":%d,"name":"n%d","vip":%t}`, id, n, n%2 == 0)
				}
				recs = append(recs, keyed(topic, p, nil, &v, n))
				want[fmt.Sprint(id)] = fmt.Sprintf("n%d", n)
				n++
			}
			e.Produce(recs)
		}
	}
	member := func() *member {
		tbl, dlq := e.TableWithDeadLetters(table, opts)
		cfg := groupConfig(topic, group)
		cfg.DeadLetters = dlq
		return e.startMemberOn(tbl, cfg)
	}
	produce(false)
	a := member()
	time.Sleep(2 * time.Second)
	b := member()
	time.Sleep(3 * time.Second)
	produce(true)
	statsA := a.halt(t)
	produce(true)
	waitLedger(t, e, table, e.endOffsets(topic), 60*time.Second)
	statsB := b.halt(t)
	if statsA.Records == 0 || statsB.Records == 0 {
		t.Fatalf("a member sank nothing: %d and %d rows", statsA.Records, statsB.Records)
	}
	tbl := e.OpenTable(table, snapshot.OpenOptions{})
	got := map[string]string{}
	vip := 0
	for _, r := range rows(t, tbl) {
		id := r.Columns["id"]
		if _, dup := got[id]; dup {
			t.Fatalf("id %s has two rows", id)
		}
		got[id] = r.Columns["name"]
		if r.Columns["vip"] != "(null)" {
			vip++
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("table %v\nwant  %v", got, want)
	}
	if vip == 0 {
		t.Fatal("the column added mid-stream holds no value")
	}
	t.Logf("%d keys, %d with vip; members: %d and %d rows, %d and %d rebalances", len(got), vip, statsA.Records, statsB.Records, statsA.Rebalances, statsB.Rebalances)
}

// TestUpsertCompactedAuditsComplete: a compaction of an upsert table
// merges the files of several Kafka partitions into one file per Iceberg
// partition. It recorded no file group for them, so the audit's rows
// level found a file holding rows of partitions 0 to 3 "altered after it
// was committed" (NOT COMPLETE) on a table that was right, as every
// multi-partition upsert table became once in-sink compaction ran. Found
// by a new-user run.
func TestUpsertCompactedAuditsComplete(t *testing.T) {
	e := newEnv(t)
	const topic = "accounts-compacted"
	e.Topic(topic, 4, nil)
	tbl, dlq := e.upsertTable("lake.accounts_compacted")
	var recs []*kgo.Record
	for i := range 80 {
		k, v := fmt.Sprintf("k%d", i%7), fmt.Sprintf("v%d", i)
		recs = append(recs, keyed(topic, int32(i%7%4), &k, &v, i))
	}
	e.Produce(recs)
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	before := latestRows(t, tbl)
	res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{})
	if err != nil || res.Added == 0 {
		t.Fatalf("compaction %+v, %v", res, err)
	}
	if after := latestRows(t, tbl); !maps.Equal(before, after) {
		t.Fatalf("compaction changed the table: %v, then %v", before, after)
	}
	t.Logf("compaction %+v", res)
	if !auditSays(t, e, tbl) {
		t.Fatal("the audit of a compacted upsert table reports findings")
	}
}

// TestUpsertCompactDropsDeadDeletes: a flush that writes a key twice keeps
// one row and commits an equality delete of the key, which applies to no
// data file (it deletes only older rows). A compaction with no file to
// rewrite left it ("nothing to merge"), so floe files refused the table
// for good (it lists delete files now). It drops such delete files now,
// and floe files lists no delete file. Found by a new-user run.
func TestUpsertCompactDropsDeadDeletes(t *testing.T) {
	e := newEnv(t)
	const topic = "accounts-dead-deletes"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.upsertTable("lake.accounts_dead_deletes")
	e.Produce([]*kgo.Record{keyed(topic, 0, ptr("a"), ptr("1"), 0), keyed(topic, 0, ptr("a"), ptr("2"), 1), keyed(topic, 0, ptr("b"), ptr("1"), 2)})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if before, err := lookup.Files(e.Ctx, tbl, 0); err != nil || len(before.DeleteFiles) != 1 {
		t.Fatalf("floe files before the compaction: %+v, %v; want the delete file listed", before, err)
	}
	res, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{})
	if err != nil || res.DroppedDeletes != 1 || res.Replaced != 0 {
		t.Fatalf("compaction %+v, %v; want the dead delete file dropped, no data file replaced", res, err)
	}
	if got := latestRows(t, tbl); !maps.Equal(got, map[string]string{"a": "2", "b": "1"}) {
		t.Fatalf("table after the compaction: %v", got)
	}
	files, err := lookup.Files(e.Ctx, tbl, 0)
	if err != nil || len(files.Files) != 1 || len(files.DeleteFiles) != 0 {
		t.Fatalf("floe files after the compaction: %+v, %v", files, err)
	}
	if !auditSays(t, e, tbl) {
		t.Fatal("the audit reports findings")
	}
}
