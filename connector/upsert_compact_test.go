package connector_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/testenv"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// upsertLog produces keyed changes and keeps their fold: the value each
// live key must have. Keys are "k0000".."kNNNN", each in the partition its
// number picks (so the winner of a key is its latest record by offset);
// every value is unique, so a row with the right value is the right
// record's; one record in tombstones (1/tombstoneEvery) deletes its key.
type upsertLog struct {
	topic          string
	partitions     int32
	keys           int
	tombstoneEvery int
	rng            *rand.Rand
	seq            int
	mu             sync.Mutex
	want           map[string]string
}

func newUpsertLog(topic string, partitions int32, keys int, seed uint64) *upsertLog {
	return &upsertLog{topic: topic, partitions: partitions, keys: keys, tombstoneEvery: 8,
		rng: rand.New(rand.NewPCG(seed, 3)), want: map[string]string{}}
}

// next makes n changes (the fold is updated as they are made: produce them
// all, in order).
func (u *upsertLog) next(n int) []*kgo.Record {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]*kgo.Record, n)
	for i := range out {
		k := u.rng.IntN(u.keys)
		key := fmt.Sprintf("k%04d", k)
		r := &kgo.Record{Topic: u.topic, Partition: int32(k) % u.partitions, Key: []byte(key),
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(u.seq))}
		if u.rng.IntN(u.tombstoneEvery) == 0 {
			delete(u.want, key)
		} else {
			v := fmt.Sprintf("v%d-%s", u.seq, key)
			r.Value = []byte(v)
			u.want[key] = v
		}
		u.seq++
		out[i] = r
	}
	return out
}

// fold returns a copy of the fold so far.
func (u *upsertLog) fold() map[string]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.want)
}

// checkFold fails when the table, read with iceberg-go's scan (deletes
// applied), is not exactly the fold: a key twice, a deleted key, a key
// missing or holding an older value.
func checkFold(t *testing.T, tbl *snapshot.Table, want map[string]string, when string) {
	t.Helper()
	got := latestRows(t, tbl)
	if maps.Equal(got, want) {
		return
	}
	var diffs []string
	for k, v := range want {
		if got[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: want %q, got %q", k, v, got[k]))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: deleted, got %q", k, v))
		}
	}
	t.Fatalf("%s: the table (%d keys) is not the fold (%d keys): %d keys differ, e.g. %v", when, len(got), len(want), len(diffs), diffs[:min(4, len(diffs))])
}

// liveFiles returns the numbers of live delete files and data files of
// the table's branch head (its summary's totals).
func liveFiles(t *testing.T, tbl *snapshot.Table) (deletes, data int) {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	props := tbl.Head().Summary.Properties
	deletes, err := strconv.Atoi(props["total-delete-files"])
	if err != nil {
		t.Fatalf("total-delete-files: %v", err)
	}
	if data, err = strconv.Atoi(props["total-data-files"]); err != nil {
		t.Fatalf("total-data-files: %v", err)
	}
	return deletes, data
}

// checkLedgerGapless fails unless the ledger covers every partition of
// topic from 0 to its high watermark without gap or overlap, each offset
// counted as a row, a delete or a dead letter.
func checkLedgerGapless(t *testing.T, e *env, tbl *snapshot.Table, topic string) {
	t.Helper()
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for tp, high := range e.endOffsets(topic) {
		c := mapping.Cover(l.Ranges(tp))
		if high == 0 {
			continue
		}
		if c.First != 0 || c.Next != high || len(c.Gaps)+len(c.Overlaps) > 0 || c.Records+c.Deletes+c.DeadLetters+c.Skipped != high {
			t.Fatalf("%s: ledger coverage %+v, want [0, %d) gapless, every offset counted", tp, c, high)
		}
	}
}

// TestUpsertCompactionAppliesDeletes: floe maintain --compact's compaction
// of an upsert table (Table.CompactAll) rewrites the data files with the
// equality deletes of a dozen commits applied and drops every delete file,
// in one snapshot that moves no ledger range; the rows read before and
// after are the same, the fold of the log. Updates and tombstones sunk
// after it still apply to the rewritten rows, and a second compaction
// leaves no delete file again.
func TestUpsertCompactionAppliesDeletes(t *testing.T) {
	e := newEnv(t)
	const topic = "customers"
	e.Topic(topic, 2, nil)
	tbl, dlq := e.upsertTable("lake.customers")
	u := newUpsertLog(topic, 2, 300, 1)
	e.Produce(u.next(3000))
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 250, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	checkFold(t, tbl, u.fold(), "before compaction")
	delsBefore, filesBefore := liveFiles(t, tbl)
	if delsBefore < 10 {
		t.Fatalf("%d delete files before compaction, want one per commit", delsBefore)
	}
	ledgerBefore, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	results, err := tbl.CompactAll(t.Context(), snapshot.CompactOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	res := results[0]
	t.Logf("compaction: %+v", res)
	if res.SnapshotID == 0 || res.DroppedDeletes != delsBefore || res.LiveRows != int64(len(u.fold())) || !tbl.IsCompaction(res.SnapshotID) {
		t.Fatalf("compaction %+v: want a snapshot that drops all %d delete files and writes %d rows", res, delsBefore, len(u.fold()))
	}
	if head := tbl.Head(); head.SnapshotID != res.SnapshotID || head.Summary.Properties[snapshot.KeyCompactDroppedDeletes] != fmt.Sprint(delsBefore) {
		t.Fatalf("head %d %v, want the compaction %d", head.SnapshotID, head.Summary.Properties, res.SnapshotID)
	}
	checkFold(t, tbl, u.fold(), "after compaction")
	dels, files := liveFiles(t, tbl)
	if dels != 0 || files >= filesBefore {
		t.Fatalf("after compaction: %d delete files (want 0), %d data files (before %d)", dels, files, filesBefore)
	}
	ledgerAfter, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	if len(ledgerAfter.Commits) != len(ledgerBefore.Commits) {
		t.Fatalf("the compaction changed the ledger: %d commits, before %d", len(ledgerAfter.Commits), len(ledgerBefore.Commits))
	}
	checkLedgerGapless(t, e, tbl, topic)

	// Deletes committed after the compaction apply to its files.
	e.Produce(u.next(1500))
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 300, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	checkFold(t, tbl, u.fold(), "after more updates")
	if _, err := tbl.CompactAll(t.Context(), snapshot.CompactOptions{Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	checkFold(t, tbl, u.fold(), "after the second compaction")
	if dels, _ := liveFiles(t, tbl); dels != 0 {
		t.Fatalf("%d delete files after the second compaction", dels)
	}
	checkLedgerGapless(t, e, tbl, topic)
}

// TestUpsertCompactionRacesSink runs compactions of an upsert table in a
// loop while a live sink commits updates and tombstones every few hundred
// milliseconds, until several compactions have lost a race to a sink
// commit (committed at a later attempt, on a head with equality deletes
// their rewrite did not apply). The table stays the fold of the log: no
// update lost, no deleted key resurrected, no key twice. That holds
// because the rewritten files keep the data sequence number of the
// snapshot the compaction read, so the sink's later deletes still apply to
// them.
func TestUpsertCompactionRacesSink(t *testing.T) {
	e := newEnv(t)
	const topic = "inventory"
	e.Topic(topic, 2, nil)
	tbl, dlq := e.upsertTable("lake.inventory")
	u := newUpsertLog(topic, 2, 200, 2)
	e.Produce(u.next(2000))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sinkDone := make(chan error, 1)
	go func() {
		s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, FlushRecords: 1000, FlushInterval: 300 * time.Millisecond,
			DeadLetters: dlq, Logger: quietLogger()})
		if err != nil {
			sinkDone <- err
			return
		}
		_, err = s.Run(ctx)
		sinkDone <- err
	}()
	produceDone := make(chan struct{})
	go func() {
		defer close(produceDone)
		for ctx.Err() == nil {
			e.Produce(u.next(60))
			time.Sleep(30 * time.Millisecond)
		}
	}()

	compactor, err := snapshot.Open(t.Context(), tbl.Catalog(), tbl.Identifier(), snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var runs, raced, gaveUp int
	deadline := time.Now().Add(60 * time.Second)
	for raced < 3 && time.Now().Before(deadline) {
		res, err := compactor.Compact(t.Context(), snapshot.CompactOptions{Logger: quietLogger()})
		switch {
		case errors.Is(err, snapshot.ErrCompactConflict) || (err != nil && strings.Contains(err.Error(), "nothing was committed")):
			// Committed nothing: beside a sink that commits faster than
			// it can reload and commit, a compaction gives up.
			gaveUp++
		case err != nil:
			t.Fatal(err)
		case res.Attempts > 1:
			raced++
		case res.SnapshotID == 0:
			// Nothing to do yet. A random pause, not a fixed one: the
			// compactor polling every 50 ms compacts each sink commit's
			// files within a few ms of it, and then its ~40 ms never
			// overlaps the sink's next commit 300 ms later (CI: 999
			// compactions, none raced). Starting at a random point of the
			// sink's cycle, a few compactions in a hundred overlap.
			time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		}
		runs++
	}
	cancel()
	<-produceDone
	if err := <-sinkDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("sink: %v", err)
	}
	t.Logf("%d compactions, %d committed after losing a race to the sink, %d gave up", runs, raced, gaveUp)
	if raced == 0 {
		t.Fatal("no compaction raced a sink commit: the test proved nothing")
	}
	// Catch up on what the live sink had not committed, then compare.
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	checkFold(t, tbl, u.fold(), "after compactions raced the sink")
	checkLedgerGapless(t, e, tbl, topic)
	if _, err := tbl.CompactAll(t.Context(), snapshot.CompactOptions{Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	checkFold(t, tbl, u.fold(), "after a last compaction")
}

// icebirdFold reads an upsert table keyed by kafka_key (a string) with
// icebird and returns key -> value, failing on a key read twice.
func icebirdFold(t *testing.T, ib *testenv.Icebird, tbl *snapshot.Table) map[string]string {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	rs, err := ib.Read(t.Context(), tbl.Iceberg().MetadataLocation())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rs {
		k, _ := r[mapping.ColKey].(string)
		// hyparquet reads a binary column without a logical type as text.
		v, _ := r[mapping.ColValue].(string)
		if _, dup := got[k]; dup {
			t.Fatalf("icebird: key %q has two rows", k)
		}
		got[k] = v
	}
	return got
}

// TestUpsertReadByIcebird: icebird, a reader outside Go that applies v2
// equality deletes, reads the upsert sink's table as iceberg-go's scan
// does, equal to the fold of the log: after the sink's commits (equality
// deletes), after a compaction (rewritten files that keep an older data
// sequence number, no delete file) and after more commits on top of it.
func TestUpsertReadByIcebird(t *testing.T) {
	ib := testenv.NewIcebird(t)
	e := newEnv(t)
	const topic = "accounts"
	e.Topic(topic, 2, nil)
	tbl, dlq := e.upsertTable("lake.accounts")
	u := newUpsertLog(topic, 2, 150, 4)
	check := func(when string) {
		t.Helper()
		want := u.fold()
		checkFold(t, tbl, want, when)
		if got := icebirdFold(t, ib, tbl); !maps.Equal(got, want) {
			t.Fatalf("%s: icebird read %d keys, the fold has %d (iceberg-go's scan agrees with the fold)", when, len(got), len(want))
		}
	}
	sink := func(n int) {
		t.Helper()
		e.Produce(u.next(n))
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 200, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
	}
	sink(1500)
	if dels, _ := liveFiles(t, tbl); dels < 5 {
		t.Fatalf("%d delete files: the sink should have written one per commit", dels)
	}
	check("after the sink")
	if _, err := tbl.CompactAll(t.Context(), snapshot.CompactOptions{Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	check("after compaction")
	sink(800)
	check("after more commits on the compacted table")
}
