package replay_test

// From a review: replay's bounds at every kind of offset, time bounds
// over retention, and what a publish refuses.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestReplayFromTimeAfterRetentionRefused: partition 0 holds offsets 0-99
// stamped +0s..+99s; retention deletes [0, 40). A replay --from +10s
// ("everything since then") starts at the log start 40 and reports a
// complete replay, with nothing said and nothing recorded about [10, 40),
// thirty records stamped at or after the time that retention deleted.
// The same start given as offsets (--from 0=10) is refused ("retention
// deleted everything below 40"), and --from earliest records [0, 40) as
// lost (Plan.HeadLost, a lost range in the ledger): "never skipped
// silently". A time whose first retained record is the log start of a
// partition whose log start is above 0 (so that deleted records may have
// been stamped at or after it) must be refused, or said and recorded.
func TestReplayFromTimeAfterRetentionRefused(t *testing.T) {
	e := newEnv(t)
	const topic = "timeret"
	e.Topic(topic, 1, nil)
	base := e.produceSeconds(topic, 100)
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 40); err != nil {
		t.Fatal(err)
	}
	if _, err := e.replay("lake.timeret_offsets", replay.Options{Topic: topic, From: bound(t, "0=10", topic, true)}); err == nil {
		t.Fatal("--from 0=10 below the log start 40 was accepted")
	}
	from := base.Add(10 * time.Second).UTC().Format(time.RFC3339)
	res, err := e.replay("lake.timeret", replay.Options{Topic: topic, From: bound(t, from, topic, true)})
	if err != nil {
		// Refused, naming the ways on (the fix).
		if !strings.Contains(err.Error(), "retention deleted everything below 40") || !strings.Contains(err.Error(), "replay from earliest") {
			t.Fatalf("refused, but not saying why: %v", err)
		}
		return
	}
	c := coverOf(t, e, "lake.timeret", mapping.TopicPartition{Topic: topic})
	rep, aerr := audit.Run(e.Ctx, e.openExisting("lake.timeret", ""), audit.Options{Depth: audit.DepthRows, Broker: e.Dial()})
	if aerr == nil {
		t.Logf("audit with brokers: complete %v, findings %+v", rep.Complete(), rep.Findings)
	}
	if len(res.Plan.HeadLost) == 0 && len(c.Lost) == 0 {
		t.Fatalf("replay --from %s (offset 10) after retention deleted [0, 40): complete %v, plan [%d, %d), ledger [%d, %d), nothing lost recorded or said; the 30 records stamped +10s..+39s are skipped silently",
			from, res.Complete, res.Plan.Start[0], res.Plan.End[0], c.First, c.Next)
	}
}

// TestReplayPublishOverRecreatedTopicRefused: main sank topic rebornpub, offsets
// 0-99. The topic is deleted and recreated (a new topic ID) with ten new
// records; main's hundred rows now exist nowhere else. A replay onto a
// branch reads the new topic's [0, 10) and --publish (without
// --publish-different) replaces main by it: mainRowsLost compares
// offsets only, takes the new [0, 10) for main's [0, 10) and [10, 100)
// for "read again by a sink on main", and main loses its hundred rows
// (ninety of them no sink can bring back). A branch of another topic ID
// than main's holds none of main's records: publishing it must be refused
// (exit 2, main unchanged) unless --publish-different, as for offsets
// retention deleted.
func TestReplayPublishOverRecreatedTopicRefused(t *testing.T) {
	e := newEnv(t)
	const topic = "rebornpub"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "old"))
	if _, err := e.sink(e.Table("lake.rebornpub"), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Dial().Admin().DeleteTopics(e.Ctx, topic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "new"))
	res, err := e.replay("lake.rebornpub", replay.Options{Topic: topic, Branch: "rebuild", Publish: true})
	t.Logf("replay --publish: published %v, err %v", res.Published, err)
	got := rows(t, e.openExisting("lake.rebornpub", ""))
	var old int
	for _, r := range got {
		if len(r.Value) >= 3 && r.Value[:3] == "old" {
			old++
		}
	}
	if res.Published || old != 90 {
		t.Fatalf("main holds %d rows (%d of the deleted topic) after publishing a branch of the recreated topic (published %v); want main unchanged", len(got), old, res.Published)
	}
}

// TestReplayUntilAtEveryBoundary (held): the log is 0-9 plain, a committed
// transaction 10-12 (marker 13), an aborted one 14-15 (marker 16), 17-21
// plain. For every --until 0=U, a replay must end its ledger exactly at U
// with the committed records below U as rows; then the same replay taken
// on with --until 0=22 must hold every committed record exactly once and
// a ledger [0, 22).
func TestReplayUntilAtEveryBoundary(t *testing.T) {
	e := newEnv(t)
	const topic = "untilb"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	e.Txn("uc", records(topic, 0, 3, "c"), true)
	e.Txn("ua", records(topic, 0, 2, "x"), false)
	e.Produce(records(topic, 0, 5, "d"))
	committed := func(u int64) int {
		n := 0
		for o := int64(0); o < u; o++ {
			if o <= 12 && o != 13 || o >= 17 {
				n++
			}
		}
		return n
	}
	tp := mapping.TopicPartition{Topic: topic}
	for u := int64(9); u <= 22; u++ {
		name := fmt.Sprintf("lake.untilb_%d", u)
		res, err := e.replay(name, replay.Options{Topic: topic, Until: bound(t, fmt.Sprintf("0=%d", u), topic, false), Sink: connector.Config{FlushRecords: 2}})
		if err != nil || !res.Complete {
			t.Errorf("--until 0=%d: complete %v, %v", u, res.Complete, err)
			continue
		}
		c := coverOf(t, e, name, tp)
		n := len(rows(t, e.openExisting(name, "")))
		if c.Next != u || n != committed(u) || len(c.Gaps) > 0 || len(c.Overlaps) > 0 {
			t.Errorf("--until 0=%d: ledger [%d, %d) gaps %v overlaps %v, %d rows; want [0, %d), %d rows", u, c.First, c.Next, c.Gaps, c.Overlaps, n, u, committed(u))
			continue
		}
		res, err = e.replay(name, replay.Options{Topic: topic, Until: bound(t, "0=22", topic, false), Sink: connector.Config{FlushRecords: 2}})
		if err != nil || !res.Complete {
			t.Errorf("--until 0=%d then 0=22: complete %v, %v", u, res.Complete, err)
			continue
		}
		c = coverOf(t, e, name, tp)
		got := rows(t, e.openExisting(name, ""))
		seen := map[int64]bool{}
		for _, r := range got {
			if seen[r.Offset] {
				t.Errorf("--until 0=%d then 0=22: offset %d twice", u, r.Offset)
			}
			seen[r.Offset] = true
		}
		if c.Next != 22 || len(got) != committed(22) || len(c.Gaps) > 0 || len(c.Overlaps) > 0 {
			t.Errorf("--until 0=%d then 0=22: ledger [%d, %d) gaps %v overlaps %v, %d rows; want [0, 22), %d rows", u, c.First, c.Next, c.Gaps, c.Overlaps, len(got), committed(22))
		}
	}
}

// TestReplayFromAtEveryBoundary (held): the log of TestReplayUntilAtEveryBoundary;
// for every --from 0=F, the replay holds exactly the committed records at
// or above F and a ledger [F, 22).
func TestReplayFromAtEveryBoundary(t *testing.T) {
	e := newEnv(t)
	const topic = "fromb"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	e.Txn("fc", records(topic, 0, 3, "c"), true)
	e.Txn("fa", records(topic, 0, 2, "x"), false)
	e.Produce(records(topic, 0, 5, "d"))
	tp := mapping.TopicPartition{Topic: topic}
	for f := int64(8); f <= 22; f++ {
		name := fmt.Sprintf("lake.fromb_%d", f)
		res, err := e.replay(name, replay.Options{Topic: topic, From: bound(t, fmt.Sprintf("0=%d", f), topic, true), Sink: connector.Config{FlushRecords: 2}})
		if err != nil || !res.Complete {
			t.Errorf("--from 0=%d: complete %v, %v", f, res.Complete, err)
			continue
		}
		want := 0
		for o := f; o < 22; o++ {
			if o <= 12 || o >= 17 {
				want++
			}
		}
		c := coverOf(t, e, name, tp)
		got := rows(t, e.openExisting(name, ""))
		bad := false
		for _, r := range got {
			if r.Offset < f || (r.Offset > 12 && r.Offset < 17) {
				bad = true
			}
		}
		if c.First != f || c.Next != 22 || len(got) != want || bad || len(c.Gaps) > 0 {
			t.Errorf("--from 0=%d: ledger [%d, %d) gaps %v, %d rows (bad offsets %v); want [%d, 22), %d rows", f, c.First, c.Next, c.Gaps, len(got), bad, f, want)
		}
	}
}

// TestReplayInterruptedBeforePublishSaysSo: a replay --branch --publish is
// interrupted (SIGINT: its context cancelled) just as its last commit
// lands. Run reports it complete, with no error and nothing published:
// floe replay then prints the result without a "published" line and
// exits 0, the exit of a replay that did what it was asked. A --publish
// that did not publish must say so and not exit 0 (an interrupted
// replay exits 2, "run the same command again").
func TestReplayInterruptedBeforePublishSaysSo(t *testing.T) {
	e := newEnv(t)
	const topic = "lateint"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 30, "a"))
	if _, err := e.sink(e.Table("lake.lateint"), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	cat, ident := e.CatalogOf("lake.lateint")
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	opts := replay.Options{Topic: topic, Branch: "rebuild", Publish: true}
	opts.Sink.Logger = quietLogger()
	opts.Sink.OnCommit = func(r snapshot.Result) {
		for _, rg := range r.Commit.Ranges {
			if rg.High == 30 {
				cancel() // SIGINT as the last commit lands
			}
		}
	}
	res, err := replay.Run(ctx, e.Dial(), cat, ident, opts)
	if err == nil && res.Complete && !res.Published && !res.PublishedBefore {
		t.Fatalf("replay --publish interrupted after its last commit: complete %v, published %v, no error: floe replay exits 0 without publishing", res.Complete, res.Published)
	}
	t.Logf("complete %v published %v err %v", res.Complete, res.Published, err)
}

// TestReplayCompactedTopicBoundaries (held): a compacted topic with holes at 1
// and 2; every --from 0=F and --until 0=U (F <= U) replays exactly the
// retained records in [F, U) with a ledger [F, U).
func TestReplayCompactedTopicBoundaries(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpb"
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	base := time.Now().Add(-time.Hour)
	for i, k := range []string{"u0", "k1", "k2", "k1", "k2", "z", "y"} {
		e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(k), Value: []byte(k), Timestamp: base.Add(time.Duration(i) * time.Second)}})
	}
	e.Stack.Cluster.Compact()
	kept := map[int64]bool{0: true, 3: true, 4: true, 5: true, 6: true}
	tp := mapping.TopicPartition{Topic: topic}
	for f := int64(0); f <= 7; f++ {
		for u := f; u <= 7; u++ {
			name := fmt.Sprintf("lake.cmpb_%d_%d", f, u)
			res, err := e.replay(name, replay.Options{Topic: topic, From: bound(t, fmt.Sprintf("0=%d", f), topic, true), Until: bound(t, fmt.Sprintf("0=%d", u), topic, false)})
			if err != nil || !res.Complete {
				t.Errorf("[%d, %d): complete %v, %v", f, u, res.Complete, err)
				continue
			}
			want := 0
			for o := f; o < u; o++ {
				if kept[o] {
					want++
				}
			}
			c := coverOf(t, e, name, tp)
			n := len(rows(t, e.openExisting(name, "")))
			if c.First != f || (u > f && c.Next != u) || n != want {
				t.Errorf("[%d, %d): ledger [%d, %d), %d rows; want %d rows", f, u, c.First, c.Next, n, want)
			}
		}
	}
}

// TestReplayTimeWindowsEqualTimestamps (held): two partitions, records in
// runs of equal timestamps (three per second). A replay --from T1 --until
// T2, taken on with --until T3, holds exactly the offsets [first >= T1,
// first >= T3) of each partition, once.
func TestReplayTimeWindowsEqualTimestamps(t *testing.T) {
	e := newEnv(t)
	const topic = "eqts"
	e.Topic(topic, 2, nil)
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for p := range int32(2) {
		for i := range 60 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d-%d", p, i), Timestamp: base.Add(time.Duration(i/3+int(p)) * time.Second)})
		}
	}
	e.Produce(recs)
	at := func(s int) string { return base.Add(time.Duration(s) * time.Second).UTC().Format(time.RFC3339) }
	first := func(p int32, s int) int64 { // first offset whose second >= s
		for i := range 60 {
			if i/3+int(p) >= s {
				return int64(i)
			}
		}
		return 60
	}
	opts := replay.Options{Topic: topic, From: bound(t, at(5), topic, true), Until: bound(t, at(10), topic, false), Sink: connector.Config{FlushRecords: 4}}
	if res, err := e.replay("lake.eqts", opts); err != nil || !res.Complete {
		t.Fatalf("first window: %+v, %v", res, err)
	}
	opts.Until = bound(t, at(15), topic, false)
	if res, err := e.replay("lake.eqts", opts); err != nil || !res.Complete {
		t.Fatalf("taken on: %+v, %v", res, err)
	}
	got := rows(t, e.openExisting("lake.eqts", ""))
	seen := map[mapping.TopicPartition]map[int64]bool{}
	for _, r := range got {
		if seen[r.TP] == nil {
			seen[r.TP] = map[int64]bool{}
		}
		if seen[r.TP][r.Offset] {
			t.Errorf("%s offset %d twice", r.TP, r.Offset)
		}
		seen[r.TP][r.Offset] = true
	}
	for p := range int32(2) {
		tp := mapping.TopicPartition{Topic: topic, Partition: p}
		lo, hi := first(p, 5), first(p, 15)
		c := coverOf(t, e, "lake.eqts", tp)
		if int64(len(seen[tp])) != hi-lo || c.First != lo || c.Next != hi || len(c.Gaps) > 0 {
			t.Errorf("%s: %d rows, ledger [%d, %d); want [%d, %d)", tp, len(seen[tp]), c.First, c.Next, lo, hi)
		}
		for o := range seen[tp] {
			if o < lo || o >= hi {
				t.Errorf("%s: offset %d outside [%d, %d)", tp, o, lo, hi)
			}
		}
	}
}

// TestReplayPublishAfterPartitionAdded (held): main's live sink holds
// orders/0 [0, 50); a replay onto branch rebuild is complete; a partition
// is then added and main's sink sinks it ([0, 20) of partition 1). The
// publish must go through (a sink on main re-reads the new partition from
// offset 0) and main end with every offset once.
func TestReplayPublishAfterPartitionAdded(t *testing.T) {
	e := newEnv(t)
	const topic = "grows"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	if _, err := e.sink(e.Table("lake.grows"), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	opts := replay.Options{Topic: topic, Branch: "rebuild"}
	if res, err := e.replay("lake.grows", opts); err != nil || !res.Complete {
		t.Fatalf("replay onto the branch: %+v, %v", res, err)
	}
	if _, err := e.Dial().Admin().CreatePartitions(e.Ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	e.Produce(records(topic, 1, 20, "b"))
	if _, err := e.sink(e.openExisting("lake.grows", ""), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(rows(t, e.openExisting("lake.grows", ""))); n != 70 {
		t.Fatalf("main holds %d rows, want 70", n)
	}
	opts.Publish = true
	res, err := e.replay("lake.grows", opts)
	if err != nil || !res.Published {
		t.Fatalf("publish after a partition was added (main's sink re-reads it from offset 0): published %v, %v", res.Published, err)
	}
	if _, err := e.sink(e.openExisting("lake.grows", ""), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, e.openExisting("lake.grows", ""), map[mapping.TopicPartition]int64{{Topic: topic}: 50, {Topic: topic, Partition: 1}: 20})
}

// TestReplayFromTimeIdlePartitionExpired (from a review): partition 1 got
// five records long before the time, which retention has since deleted
// (its log start is its end, 5), partition 0 holds records stamped after
// them. A replay --from a time was refused on partition 1, which holds no
// record at all; it starts partition 0 at the time and 1 at its end.
func TestReplayFromTimeIdlePartitionExpired(t *testing.T) {
	e := newEnv(t)
	const topic = "idleexp"
	e.Topic(topic, 2, nil)
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, "old%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	for i := range 100 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(100+i) * time.Second)})
	}
	e.Produce(recs)
	if err := e.Stack.Cluster.DeleteRecords(topic, 1, 5); err != nil {
		t.Fatal(err)
	}
	from := base.Add(150 * time.Second).UTC().Format(time.RFC3339)
	res, err := e.replay("lake.idleexp", replay.Options{Topic: topic, From: bound(t, from, topic, true)})
	if err != nil {
		t.Fatalf("replay --from %s: %v", from, err)
	}
	if res.Plan.Start[0] != 50 || res.Plan.Start[1] != 5 {
		t.Errorf("plan starts %v; want 0:50, 1:5", res.Plan.Start)
	}
}

// TestReplayFromTimeWithinTimeRetention: a topic that deletes by time
// alone (retention.ms, no retention.bytes) deletes a record only once it
// is older than retention.ms, so a time within the retention window is
// later than every deleted record: a replay --from it whose first record
// is the log start is not refused, and one from a time before the window
// still is.
func TestReplayFromTimeWithinTimeRetention(t *testing.T) {
	e := newEnv(t)
	const topic = "timeretained"
	hour, unlimited := "3600000", "-1"
	e.Topic(topic, 1, map[string]*string{"retention.ms": &hour, "retention.bytes": &unlimited})
	now := time.Now()
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i), Timestamp: now.Add(time.Duration(i-20) * time.Second)})
	}
	e.Produce(recs)
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 10); err != nil {
		t.Fatal(err)
	}
	within := now.Add(-30 * time.Minute).UTC().Format(time.RFC3339)
	res, err := e.replay("lake.timeretained", replay.Options{Topic: topic, From: bound(t, within, topic, true)})
	if err != nil || res.Plan.Start[0] != 10 {
		t.Fatalf("replay --from %s (within retention.ms): %+v, %v; want it to start at the log start 10", within, res.Plan.Start, err)
	}
	// It trusts the retention, and says so: records deleted by hand, as
	// here, are not seen (from a new-user run).
	if res.Plan.TrustedRetention[0] != 10 {
		t.Errorf("plan's trusted retention %v, want partition 0 at its log start 10", res.Plan.TrustedRetention)
	}
	before := now.Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if _, err := e.replay("lake.timeretained2", replay.Options{Topic: topic, From: bound(t, before, topic, true)}); err == nil || !strings.Contains(err.Error(), "retention deleted everything below 10") {
		t.Fatalf("replay --from %s (before the retention window): %v; want it refused", before, err)
	}
}

// TestReplayTruncateV3RefusedBeforeCreating (from a review): a replay of
// Debezium events with --on-truncate delete-all into a new table of format
// version 3 created the table before the sink refused it, leaving a v3
// table that the same replay with --format-version 2 was refused on; it
// is refused before anything is created, as floe sink refuses it.
func TestReplayTruncateV3RefusedBeforeCreating(t *testing.T) {
	e := newEnv(t)
	const topic = "dbzv3"
	e.Topic(topic, 1, nil)
	opts := replay.Options{Topic: topic,
		Layout:     mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium},
		Mode:       mapping.ModeUpsert,
		Key:        &mapping.UpsertKey{Source: mapping.KeyFromKeyFields},
		Properties: map[string]string{"format-version": "3"},
	}
	opts.Sink.OnTruncate = connector.TruncateDeleteAll
	_, err := e.replay("lake.dbzv3", opts)
	if _, ok := errors.AsType[*connector.ConfigError](err); !ok || !strings.Contains(err.Error(), "format version 3 cannot take a truncate") {
		t.Fatalf("replay --on-truncate delete-all into a new v3 table: %v; want a ConfigError", err)
	}
	cat, ident := e.CatalogOf("lake.dbzv3")
	if _, oerr := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{}); oerr == nil {
		t.Errorf("refused (%v), but after creating lake.dbzv3; want it refused before creating", err)
	}
}
