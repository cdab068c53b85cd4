package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// replay runs replay.Run into table name with a quiet sink.
func (e *env) replay(name string, opts replay.Options) (replay.Result, error) {
	e.T.Helper()
	cat, ident := e.CatalogOf(name)
	if opts.Sink.Logger == nil {
		opts.Sink.Logger = quietLogger()
	}
	return replay.Run(e.Ctx, e.Dial(), cat, ident, opts)
}

// openExisting opens a table (on a branch) without creating it.
func (e *env) openExisting(name, branch string) *snapshot.Table {
	e.T.Helper()
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		e.T.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	tbl, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{Branch: branch})
	if err != nil {
		e.T.Fatal(err)
	}
	return tbl
}

func (e *env) exists(name string) bool {
	e.T.Helper()
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		e.T.Fatal(err)
	}
	ident, _ := catalog.ParseIdent(name)
	ok, err := cat.CheckTableExists(e.Ctx, ident)
	if err != nil {
		e.T.Fatal(err)
	}
	return ok
}

func bound(t testing.TB, s, topic string, from bool) replay.Bound {
	t.Helper()
	b, err := replay.ParseBound(s, topic, from)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fullRows returns every row of the table's branch head as a JSON array of
// (partition, offset, key, value, headers, timestamp), sorted: a multiset
// comparable across tables.
func fullRows(t testing.TB, tbl *snapshot.Table) []string {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := tableRows(t.Context(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tableRows(ctx context.Context, tbl *snapshot.Table) ([]string, error) {
	if tbl.Head() == nil {
		return nil, nil
	}
	var out []string
	err := tbl.Rows(ctx, 0, nil, func(b arrow.RecordBatch) error {
		cols := []string{mapping.ColPartition, mapping.ColOffset, mapping.ColKey, mapping.ColValue, mapping.ColHeaders, mapping.ColTimestamp}
		for i := range int(b.NumRows()) {
			row := make([]any, len(cols))
			for j, c := range cols {
				row[j] = b.Column(b.Schema().FieldIndices(c)[0]).GetOneForMarshal(i)
			}
			s, err := json.Marshal(row)
			if err != nil {
				return err
			}
			out = append(out, string(s))
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

func TestReplayRebuildEqualsSink(t *testing.T) {
	e := newEnv(t)
	const topic = "rebuild"
	e.MixedLog(topic, floetest.MixedLog{Partitions: 3, Records: 120, Committed: 10, Aborted: 7, Trailing: 30, TrailingOn: 1})

	sunk := e.Table("lake.sunk")
	if _, err := e.sink(sunk, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100}); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	var started replay.Start
	res, err := e.replay("lake.rebuilt", replay.Options{Topic: topic,
		Sink:    connector.Config{FlushRecords: 70, OnRecords: func(n int64) { done.Add(n) }},
		OnStart: func(s replay.Start) { started = s }})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || res.Resumed || len(res.Plan.HeadLost) != 0 {
		t.Fatalf("replay result %+v", res)
	}
	ends := e.endOffsets(topic)
	var total int64
	for _, end := range ends {
		total += end
	}
	if started.Remaining != total || done.Load() != total {
		t.Fatalf("progress: remaining at start %d, offsets reported %d; want %d", started.Remaining, done.Load(), total)
	}
	rebuilt := e.openExisting("lake.rebuilt", "")
	checkExactlyOnce(t, rebuilt, ends)
	want, got := fullRows(t, sunk), fullRows(t, rebuilt)
	if len(want) != 3*120+30+30 || !slices.Equal(got, want) {
		t.Fatalf("rebuilt table (%d rows) differs from the sunk table (%d rows)", len(got), len(want))
	}

	// The same replay again resumes from the rebuilt table's ledger: nothing left.
	res, err = e.replay("lake.rebuilt", replay.Options{Topic: topic})
	if err != nil || !res.Resumed || res.Remaining != 0 || res.Stats.Commits != 0 {
		t.Fatalf("second run: %+v, %v; want a resumed no-op", res, err)
	}
	// A replay never writes into a table that is not its own.
	before := fullRows(t, sunk)
	var refused *replay.CheckError
	if _, err := e.replay("lake.sunk", replay.Options{Topic: topic}); !errors.As(err, &refused) || !slices.Contains(refused.Settings, replay.SettingBranch) {
		t.Fatalf("replay into the sunk table: %v, want a refusal naming the branch option", err)
	}
	if !slices.Equal(fullRows(t, sunk), before) {
		t.Fatal("refused replay changed the table")
	}
}

func TestReplayFromTimestamp(t *testing.T) {
	e := newEnv(t)
	const topic = "bytime"
	e.Topic(topic, 2, nil)
	base := time.UnixMilli(1_700_000_000_000)
	// Per partition, one record per produce call (one batch each), with
	// timestamps out of order: seconds 0, 12, 10, 22, 20, 32, 30, ...
	secs := map[int32][]int64{}
	for p := range int32(2) {
		for i := range 40 {
			s := int64(i * 5)
			if i%2 == 1 {
				s += 7 + int64(p)
			}
			secs[p] = append(secs[p], s)
			e.Produce([]*kgo.Record{{Topic: topic, Partition: p, Key: []byte("k"), Value: fmt.Appendf(nil, "%d", s),
				Timestamp: base.Add(time.Duration(s) * time.Second)}})
		}
	}
	for _, at := range []int64{0, 33, 62, 500} {
		when := base.Add(time.Duration(at) * time.Second)
		listed, err := e.Dial().Admin().ListOffsetsAfterMilli(e.Ctx, when.UnixMilli(), topic)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("lake.from_%d", at)
		res, err := e.replay(name, replay.Options{Topic: topic, From: bound(t, when.Format(time.RFC3339), topic, true)})
		if err != nil {
			t.Fatal(err)
		}
		tbl := e.openExisting(name, "")
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		rows := rows(t, tbl)
		for p := range int32(2) {
			lo, ok := listed.Lookup(topic, p)
			if !ok {
				t.Fatalf("no listed offset for partition %d", p)
			}
			// The first offset whose timestamp is at or after the time,
			// or the end offset (40) when none is.
			want := int64(slices.IndexFunc(secs[p], func(s int64) bool { return s >= at }))
			if want < 0 {
				want = 40
			}
			if lo.Offset != want || res.Plan.Start[p] != lo.Offset {
				t.Fatalf("at +%ds partition %d: ListOffsets %d, plan start %d, want %d", at, p, lo.Offset, res.Plan.Start[p], want)
			}
			tp := mapping.TopicPartition{Topic: topic, Partition: p}
			c := mapping.Cover(l.Ranges(tp))
			var n int64
			for _, r := range rows {
				if r.TP == tp {
					n++
					if r.Offset < want {
						t.Fatalf("at +%ds partition %d: row at offset %d is below the start %d", at, p, r.Offset, want)
					}
				}
			}
			if want < 40 && (c.First != want || c.Next != 40) || n != 40-want {
				t.Fatalf("at +%ds partition %d: ledger [%d, %d), %d rows; want [%d, 40), %d rows", at, p, c.First, c.Next, n, want, 40-want)
			}
		}
	}
}

func TestReplayBadInput(t *testing.T) {
	e := newEnv(t)
	const topic = "bad"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 20, "a"))
	e.Produce(records(topic, 1, 20, "a"))
	main := e.Table("lake.main")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		name         string
		opts         replay.Options
		is           error
		mention      string
		branchOfMain bool
	}{
		{"from in the future", replay.Options{Topic: topic, From: bound(t, future, topic, true)}, replay.ErrBadBound, "future", false},
		{"until before from", replay.Options{Topic: topic, From: bound(t, "0=10", topic, true), Until: bound(t, "0=5", topic, false)}, replay.ErrBadBound, "is before Options.From", false},
		{"until time before from time", replay.Options{Topic: topic,
			From: bound(t, "2024-05-02T00:00:00Z", topic, true), Until: bound(t, "2024-05-01T00:00:00Z", topic, false)}, replay.ErrBadBound, "is before Options.From", false},
		{"until past the end", replay.Options{Topic: topic, Until: bound(t, "1=999", topic, false)}, replay.ErrBadBound, "past its end", false},
		{"unknown partition", replay.Options{Topic: topic, From: bound(t, "7=0", topic, true)}, replay.ErrBadBound, "no partition 7", false},
		{"unknown snapshot", replay.Options{Topic: topic, From: bound(t, "snapshot:424242", topic, true)}, nil, "snapshot 424242", false},
		{"unknown snapshot on a branch", replay.Options{Topic: topic, From: bound(t, "snapshot:424242", topic, true), Branch: "b"}, nil, "snapshot 424242", true},
		{"unknown topic", replay.Options{Topic: "nope"}, connector.ErrUnknownTopic, "does not exist", false},
		{"unknown topic on a branch", replay.Options{Topic: "nope", Branch: "b", Publish: true}, connector.ErrUnknownTopic, "does not exist", true},
	} {
		target := "lake.bad"
		if c.branchOfMain {
			target = "lake.main"
		}
		_, err := e.replay(target, c.opts)
		if err == nil || (c.is != nil && !errors.Is(err, c.is)) || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("%s: error %v; want one matching %v and mentioning %q", c.name, err, c.is, c.mention)
		}
		if e.exists("lake.bad") {
			t.Fatalf("%s: the failed replay created its table", c.name)
		}
		if e.openExisting("lake.main", "").HasBranch("b") {
			t.Fatalf("%s: the failed replay created its branch", c.name)
		}
	}
	var unknown *snapshot.UnknownSnapshotError
	if _, err := e.replay("lake.bad", replay.Options{Topic: topic, From: bound(t, "snapshot:424242", topic, true)}); !errors.As(err, &unknown) {
		t.Fatalf("unknown snapshot: %v, want an UnknownSnapshotError", err)
	}
	// A snapshot of the sunk table is a valid start: its positions.
	mid := e.openExisting("lake.main", "").Head().SnapshotID
	res, err := e.replay("lake.fromsnap", replay.Options{Topic: topic, From: bound(t, fmt.Sprintf("snapshot:%d", mid), topic, true)})
	if err != nil || res.Plan.Start[0] != 20 || res.Plan.Start[1] != 20 || res.SourceTable != "lake.main" {
		t.Fatalf("replay from a snapshot: %+v, %v", res.Plan, err)
	}
}

func TestReplayHeadLoss(t *testing.T) {
	e := newEnv(t)
	const topic = "headloss"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 60, "a"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 25); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.headloss", replay.Options{Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.HeadLost[0] != 25 || res.Stats.Records != 35 {
		t.Fatalf("plan head lost %v, rows %d; want log start 25 and 35 rows", res.Plan.HeadLost, res.Stats.Records)
	}
	l, err := e.openExisting("lake.headloss", "").Ledger()
	if err != nil {
		t.Fatal(err)
	}
	c := mapping.Cover(l.Ranges(mapping.TopicPartition{Topic: topic, Partition: 0}))
	if c.First != 0 || c.Next != 60 || len(c.Gaps) != 0 || len(c.Lost) != 1 || c.Lost[0] != (mapping.Interval{Low: 0, High: 25}) {
		t.Fatalf("ledger coverage %+v: want [0, 60) with [0, 25) lost", c)
	}
	// Resuming a replay from earliest recognises its own table.
	if res, err := e.replay("lake.headloss", replay.Options{Topic: topic}); err != nil || !res.Resumed {
		t.Fatalf("resume: %+v, %v", res, err)
	}
}

// keyedLog produces, on 2 partitions, updates and tombstones over 12 keys,
// and returns the expected latest value per partition/key.
func keyedLog(e *env, topic string) map[string]string {
	want := map[string]string{}
	var recs []*kgo.Record
	for i := range 300 {
		p := int32(i % 2)
		k := fmt.Sprintf("k%02d", (i*7)%12)
		r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: fmt.Appendf(nil, "v%d", i)}
		id := fmt.Sprintf("%d/%s", p, k)
		switch {
		case i%11 == 4:
			r.Value = nil
			delete(want, id)
		case i%29 == 3:
			r.Key = nil // skipped by the fold
		default:
			want[id] = string(r.Value)
		}
		recs = append(recs, r)
	}
	e.Produce(recs)
	return want
}

// state reads a state table as partition/key -> value, failing on a
// duplicate key.
func state(t testing.TB, tbl *snapshot.Table) map[string]string {
	t.Helper()
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows(t, tbl) {
		id := fmt.Sprintf("%d/%s", r.TP.Partition, r.Key)
		if _, dup := out[id]; dup || r.KeyNil || r.ValNil {
			t.Fatalf("state row %+v is a duplicate, a null key or a tombstone", r)
		}
		out[id] = r.Value
	}
	return out
}

// TestReplayFold: --fold latest writes an upsert table keyed by the Kafka
// key within its partition (the sink's upsert path, equality deletes read
// back by iceberg-go's scan): per partition the latest value of every key,
// tombstones delete, records without a key are skipped and counted; an
// interrupted fold resumes to the same state; events never go into it, and
// nothing is written into a legacy state table.
func TestReplayFold(t *testing.T) {
	e := newEnv(t)
	const topic = "keyed"
	e.Topic(topic, 2, nil)
	want := keyedLog(e, topic)

	res, err := e.replay("lake.state", replay.Options{Topic: topic, Fold: mapping.FoldLatest, Sink: connector.Config{FlushRecords: 40}})
	if err != nil || !res.Complete {
		t.Fatalf("fold: %+v, %v", res, err)
	}
	full := e.openExisting("lake.state", "")
	if full.Mode() != mapping.ModeUpsert || !full.UpsertKey().Equal(mapping.FoldLatestKey()) {
		t.Fatalf("fold table: mode %s key %s, want upsert keyed by %s", full.Mode(), full.UpsertKey(), mapping.FoldLatestKey())
	}
	if got := state(t, full); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("folded state:\n%v\nwant:\n%v", got, want)
	}
	ends := e.endOffsets(topic)
	l, err := full.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for tp, end := range ends {
		c := mapping.Cover(l.Ranges(tp))
		if c.First != 0 || c.Next != end || len(c.Gaps)+len(c.Overlaps) != 0 || c.Records+c.Deletes+c.Skipped != 150 || c.Deletes == 0 || c.Skipped == 0 {
			t.Fatalf("%s: ledger %+v, want [0, %d) accounting for 150 records: upserts, deletes (tombstones) and skipped (no key)", tp, c, end)
		}
	}

	// The same fold interrupted after its second commit, then resumed.
	ctx, cancel := context.WithCancel(e.Ctx)
	var commits atomic.Int32
	cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.state2")
	opts := replay.Options{Topic: topic, Fold: mapping.FoldLatest, Sink: connector.Config{FlushRecords: 40, Logger: quietLogger(),
		OnCommit: func(snapshot.Result) {
			if commits.Add(1) == 2 {
				cancel()
			}
		}}}
	res, err = replay.Run(ctx, e.Dial(), cat, ident, opts)
	if err != nil || res.Complete {
		t.Fatalf("interrupted fold: complete %v, %v; want an incomplete run", res.Complete, err)
	}
	opts.Sink.OnCommit = nil
	res, err = e.replay("lake.state2", opts)
	if err != nil || !res.Complete || !res.Resumed {
		t.Fatalf("resumed fold: %+v, %v", res, err)
	}
	if got := state(t, e.openExisting("lake.state2", "")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("interrupted and resumed fold:\n%v\nwant:\n%v", got, want)
	}
	// A fold never goes into an event table, nor events (--mode append;
	// without a mode the table's is kept) into a fold table.
	var refused *replay.CheckError
	if _, err := e.replay("lake.state", replay.Options{Topic: topic, Mode: mapping.ModeAppend}); !errors.As(err, &refused) || !slices.Contains(refused.Settings, replay.SettingMode) {
		t.Fatalf("events into a fold table: %v, want a refusal naming the mode", err)
	}
	// A legacy state table is read, never written: neither a replay
	// onto a branch of it nor a sink into it.
	legacy := e.LegacyStateTable("lake.legacy")
	e.FoldLegacy(legacy, topic, 100)
	var legacyErr *snapshot.LegacyStateError
	if _, err := e.replay("lake.legacy", replay.Options{Topic: topic, Fold: mapping.FoldLatest, Branch: "rebuild"}); !errors.As(err, &legacyErr) {
		t.Fatalf("fold onto a branch of a legacy state table: %v, want a *snapshot.LegacyStateError", err)
	}
	if _, err := connector.NewSink(e.Dial(), legacy, connector.Config{Topic: topic}); !errors.As(err, &legacyErr) {
		t.Fatalf("sink into a legacy state table: %v, want a *snapshot.LegacyStateError", err)
	}
}

func TestReplayBranchPublish(t *testing.T) {
	e := newEnv(t)
	const topic = "swap"
	e.Topic(topic, 2, nil)
	for p := range int32(2) {
		e.Produce(records(topic, p, 100, "a"))
	}
	main := e.Table("lake.swap")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	old := strings.Join(fullRows(t, main), "\n")
	for p := range int32(2) {
		e.Produce(records(topic, p, 50, "b"))
	}
	expected := e.Table("lake.expected")
	if _, err := e.sink(expected, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	rebuilt := strings.Join(fullRows(t, expected), "\n")

	// Readers of main, each on a fresh load of the table, see the old
	// content or the new one, never anything else.
	var (
		seen   sync.Map
		failed atomic.Value
		stop   = make(chan struct{})
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
			if err != nil {
				failed.Store(err.Error())
				return
			}
			ident, _ := catalog.ParseIdent("lake.swap")
			tbl, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{})
			if err != nil {
				failed.Store(err.Error())
				return
			}
			rs, err := tableRows(e.Ctx, tbl)
			if err != nil {
				failed.Store(err.Error())
				return
			}
			got := strings.Join(rs, "\n")
			seen.Store(got == old, true)
			if got != old && got != rebuilt {
				failed.Store(fmt.Sprintf("a reader of main saw %d rows: neither the old content (200 rows) nor the rebuilt one (300)", len(rs)))
				return
			}
		}
	}()
	res, err := e.replay("lake.swap", replay.Options{Topic: topic, Branch: "rebuild", Publish: true,
		Sink: connector.Config{FlushRecords: 30}})
	time.Sleep(200 * time.Millisecond) // let readers see the published content
	close(stop)
	wg.Wait()
	if err != nil || !res.Published || res.Stats.Commits < 5 {
		t.Fatalf("replay onto a branch: %+v, %v", res, err)
	}
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	main = e.openExisting("lake.swap", "")
	rs := checkExactlyOnce(t, main, e.endOffsets(topic))
	if len(rs) != 300 || main.Head().SnapshotID != res.MainTo {
		t.Fatalf("main after publish: %d rows, head %d; want 300 rows at %d", len(rs), main.Head().SnapshotID, res.MainTo)
	}
	n := 0
	seen.Range(func(any, any) bool { n++; return true })
	if n < 2 {
		t.Log("readers saw only one of the two versions")
	}
	// The rebuilt branch is auditable on its own, and re-running the same
	// replay is a resumed no-op that publishes nothing new.
	res, err = e.replay("lake.swap", replay.Options{Topic: topic, Branch: "rebuild", Publish: true})
	if err != nil || !res.Resumed || res.Stats.Commits != 0 || res.MainFrom != res.MainTo {
		t.Fatalf("second run: %+v, %v", res, err)
	}
}
