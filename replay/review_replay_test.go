package replay_test

// Adversarial review of floe replay (review-replay). Each test states the
// promise it checks; the ones that fail on the reviewed code are findings.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/audit"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// nextSum is the sum of the next offsets of every partition in tbl's
// ledger: with partitions sunk from offset 0, the offsets it covers.
func nextSum(t testing.TB, tbl *snapshot.Table) int64 {
	t.Helper()
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, next := range l.Next() {
		n += next
	}
	return n
}

// TestReviewRepublishRollsMainBack: a replay onto branch rebuild was
// published; a sink went on writing main. Running the same command again
// (the docs: "a complete replay run again ... with --publish it publishes
// if it had not yet") must not publish the old branch head over main: it
// had published already. On the reviewed code it moves main back to the
// branch's head, and main loses the rows it had committed since; with
// retention having deleted them meanwhile, they are gone for good.
func TestReviewRepublishRollsMainBack(t *testing.T) {
	e := newEnv(t)
	const topic = "republish"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	main := e.Table("lake.live")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	opts := replay.Options{Topic: topic, Branch: "rebuild", Publish: true}
	res, err := e.replay("lake.live", opts)
	if err != nil || !res.Published {
		t.Fatalf("first replay: %+v, %v", res, err)
	}
	// The live sink goes on writing main.
	e.Produce(records(topic, 0, 30, "b"))
	if _, err := e.sink(e.openExisting("lake.live", ""), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: topic}
	checkExactlyOnce(t, e.openExisting("lake.live", ""), map[mapping.TopicPartition]int64{tp: 80})
	// The same command again.
	res, err = e.replay("lake.live", opts)
	t.Logf("second run: published %v, main %d -> %d, err %v", res.Published, res.MainFrom, res.MainTo, err)
	got := rows(t, e.openExisting("lake.live", ""))
	if len(got) != 80 {
		t.Fatalf("main holds %d rows after the same replay ran again, want the 80 it had committed (main moved %d -> %d)", len(got), res.MainFrom, res.MainTo)
	}
}

// TestReviewCompleteReplayAfterRetention: a complete replay run again is a
// no-op ("already holds this whole replay ... even when the log has grown
// since"). Once retention has deleted past its recorded end, running it
// again fails instead, with an error that names no fix and, from Go (a
// zero From Bound), reads "Options.Until end (...):  on partition 0 ...".
func TestReviewCompleteReplayAfterRetention(t *testing.T) {
	e := newEnv(t)
	const topic = "aged"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	if res, err := e.replay("lake.aged", replay.Options{Topic: topic}); err != nil || !res.Complete {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	e.Produce(records(topic, 0, 30, "b"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 70); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.aged", replay.Options{Topic: topic})
	if err != nil || !res.Complete || !res.Resumed || res.Remaining != 0 {
		t.Fatalf("complete replay run again after retention: complete %v resumed %v, %v; want a resumed no-op", res.Complete, res.Resumed, err)
	}
}

// publishOverMain sinks [0, 60) of a new one-partition topic into main,
// runs before (retention, say), then replays from onto branch rebuild
// with --publish, and returns main's rows afterwards.
func publishOverMain(t *testing.T, from string, before func(e *env, topic string)) (replay.Result, int) {
	e := newEnv(t)
	const topic = "headpub"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 60, "a"))
	main := e.Table("lake.orders")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(e, topic)
	}
	res, err := e.replay("lake.orders", replay.Options{Topic: topic, From: bound(t, from, topic, true), Branch: "rebuild", Publish: true})
	t.Logf("replay: published %v, start %v, head lost %v, err %v", res.Published, res.Plan.Start, res.Plan.HeadLost, err)
	return res, len(rows(t, e.openExisting("lake.orders", "")))
}

// TestReviewPublishAfterHeadLossDropsMainRows: main sank [0, 60) while the
// log held it all; retention then deleted [0, 25). A replay from earliest
// (the default) onto a branch records [0, 25) as lost, and --publish makes
// that branch main without looking at what main holds: main loses 25 rows
// it had committed, which the log no longer holds (no sink can bring them
// back), and its audit now reports [0, 25) lost. (An upsert branch is
// compared and refused only when the lost rows' keys show in the result.)
func TestReviewPublishAfterHeadLossDropsMainRows(t *testing.T) {
	res, n := publishOverMain(t, "earliest", func(e *env, topic string) {
		if err := e.Stack.Cluster.DeleteRecords(topic, 0, 25); err != nil {
			t.Fatal(err)
		}
	})
	if n != 60 {
		t.Fatalf("main holds %d rows after publish, want the 60 it had committed (published %v; the branch records [0, 25) lost)", n, res.Published)
	}
}

// TestReviewPublishFromLaterDropsMainRows: a replay --from 0=40 onto a
// branch, published: main lost its rows [0, 40), silently (no sink reads
// below its ledger's first offset), where an upsert branch is refused for
// it. An append branch that would drop main's rows is refused as well now,
// unless --publish-different.
func TestReviewPublishFromLaterDropsMainRows(t *testing.T) {
	res, n := publishOverMain(t, "0=40", nil)
	if n != 60 || res.Published {
		t.Fatalf("main holds %d rows after publish, want the 60 it had committed (published %v)", n, res.Published)
	}
}

// TestReviewUntilBelowLedger: a replay went to offset 100; run again with
// an explicit --until 0=50 (below what the target holds). The replay then
// claims [0, 50) (its plan, its recorded end floe.replay.until=0=50, and
// complete) while the table holds [0, 100). A replayed table must hold
// exactly the range it claims: such an --until should be refused, naming
// the target's next offset.
func TestReviewUntilBelowLedger(t *testing.T) {
	e := newEnv(t)
	const topic = "shrink"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	if res, err := e.replay("lake.shrink", replay.Options{Topic: topic}); err != nil || !res.Complete {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	res, err := e.replay("lake.shrink", replay.Options{Topic: topic, Until: bound(t, "0=50", topic, false)})
	if err == nil {
		tbl := e.openExisting("lake.shrink", "")
		t.Fatalf("replay --until 0=50 onto a target holding [0, 100): no error; complete %v, plan end %v, recorded %s=%q, next %v",
			res.Complete, res.Plan.End, replay.PropUntil, tbl.Iceberg().Properties()[replay.PropUntil], res.Next)
	}
	t.Logf("refused: %v", err)
}

// commitHook wraps a catalog: before the first commit whose updates match
// (as their JSON actions and ref names), it runs hook once; a non-nil
// error from hook is returned instead of making that commit. The faults it
// injects are other writers' commits landing at a given point, which real
// concurrent writers produce only by chance.
type commitHook struct {
	icecat.Catalog
	match func(actions, refs []string) bool
	once  sync.Once
	hook  func() error
}

func (c *commitHook) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	var actions, refs []string
	for _, up := range updates {
		b, _ := json.Marshal(up)
		var u struct {
			Action string `json:"action"`
			Ref    string `json:"ref-name"`
		}
		_ = json.Unmarshal(b, &u)
		actions, refs = append(actions, u.Action), append(refs, u.Ref)
	}
	var err error
	if c.match(actions, refs) {
		c.once.Do(func() { err = c.hook() })
	}
	if err != nil {
		return nil, "", err
	}
	return c.Catalog.CommitTable(ctx, ident, reqs, updates)
}

// publishSwap matches Publish's commit: main's ref moved, no snapshot added.
func publishSwap(actions, refs []string) bool {
	swap := false
	for i, a := range actions {
		switch {
		case a == "add-snapshot":
			return false
		case a == "set-snapshot-ref" && refs[i] == table.MainBranch:
			swap = true
		}
	}
	return swap
}

// TestReviewPublishAfterCompareRace: --publish of an upsert branch
// compares it with main first and publishes only when equal ("a main that
// went further differs by coverage"). When a live sink commits on main
// between the comparison and the swap, Publish's conflict retry reloads
// and swaps anyway, without comparing again: main loses the commit it made
// (its ledger goes back from 320 to 300) though it then differed from the
// branch.
func TestReviewPublishAfterCompareRace(t *testing.T) {
	e := newEnv(t)
	const topic = "race"
	e.Topic(topic, 2, nil)
	keyedLog(e, topic)
	if res, err := e.replay("lake.state", replay.Options{Topic: topic, Fold: mapping.FoldLatest}); err != nil || !res.Complete {
		t.Fatalf("fold into lake.state: %+v, %v", res, err)
	}
	cat, ident := e.CatalogOf("lake.state")
	var mainNext int64
	hooked := &commitHook{Catalog: cat, match: publishSwap, hook: func() error {
		// A live sink on main commits 20 more records.
		var recs []*kgo.Record
		for i := range 20 {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%02d", i%12), Value: fmt.Appendf(nil, "late%d", i)})
		}
		e.Produce(recs)
		if _, err := e.sink(e.openExisting("lake.state", ""), connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger()}); err != nil {
			t.Error(err)
		}
		mainNext = nextSum(t, e.openExisting("lake.state", ""))
		return nil
	}}
	res, err := replay.Run(e.Ctx, e.Dial(), hooked, ident, replay.Options{Topic: topic, Fold: mapping.FoldLatest, Branch: "rebuild", Publish: true,
		Sink: connector.Config{Logger: quietLogger()}})
	t.Logf("publish: compared %v published %v, main sums next %d, err %v", res.Compared, res.Published, mainNext, err)
	main := e.openExisting("lake.state", "")
	if next := nextSum(t, main); next != 320 {
		t.Fatalf("main's ledger covers %d offsets after the publish, want the 320 it had committed (published %v after comparing with a main at 300)", next, res.Published)
	}
}

// interrupted runs the replay of opts into name and cancels it after its
// first commit.
func (e *env) interrupted(name string, opts replay.Options) replay.Result {
	e.T.Helper()
	cat, ident := e.CatalogOf(name)
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	opts.Sink.Logger = quietLogger()
	opts.Sink.OnCommit = func(r snapshot.Result) {
		if r.Rows > 0 {
			cancel()
		}
	}
	res, err := replay.Run(ctx, e.Dial(), cat, ident, opts)
	if err != nil || res.Complete {
		e.T.Fatalf("interrupted replay: complete %v, %v; want an incomplete run", res.Complete, err)
	}
	return res
}

// TestReviewResumeAfterRetentionPassedTheStart: a replay --from 0=30 (and
// one --from a time) is interrupted with [30, 50) committed; retention
// then deletes [0, 35), which the replay no longer needs (it continues
// from 50). Running the same command again must continue it. On the
// reviewed code the offsets replay fails with "retention deleted
// everything below 35; replay from offset 35 or later", and following
// that advice is refused as "another replay's target"; the time replay
// resolves its start to 35 and is refused the same way. The replay can
// never be finished.
func TestReviewResumeAfterRetentionPassedTheStart(t *testing.T) {
	for _, c := range []struct{ name, from string }{
		{"offsets", "0=30"},
		{"time", "time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			const topic = "aging"
			e.Topic(topic, 1, nil)
			base := e.produceSeconds(topic, 100)
			from := c.from
			if from == "time" {
				from = base.Add(30 * time.Second).UTC().Format(time.RFC3339)
			}
			opts := replay.Options{Topic: topic, From: bound(t, from, topic, true), Sink: connector.Config{FlushRecords: 10}}
			res := e.interrupted("lake.aging", opts)
			if res.Plan.Start[0] != 30 || res.Next[0] <= 35 || res.Next[0] >= 100 {
				t.Fatalf("interrupted: start %d next %d, want 30 and a next offset in (35, 100)", res.Plan.Start[0], res.Next[0])
			}
			if err := e.Stack.Cluster.DeleteRecords(topic, 0, 35); err != nil {
				t.Fatal(err)
			}
			res, err := e.replay("lake.aging", opts)
			if err != nil && c.name == "offsets" {
				// The error's advice: --from 0=35.
				advised := opts
				advised.From = bound(t, "0=35", topic, true)
				_, aerr := e.replay("lake.aging", advised)
				t.Logf("following the advice, --from 0=35: %v", aerr)
			}
			if err != nil || !res.Complete {
				t.Fatalf("resume after retention deleted [0, 35) (the replay is past 35): complete %v, %v", res.Complete, err)
			}
			if rs := checkExactlyOnce(t, e.openExisting("lake.aging", ""), map[mapping.TopicPartition]int64{{Topic: topic}: 100}); len(rs) != 70 {
				t.Fatalf("resumed replay holds %d rows, want 70", len(rs))
			}
		})
	}
}

// TestReviewReplayWhileSinkWrites: a live sink keeps writing main (small
// flushes, records arriving all the time) while a replay rebuilds main on
// a branch and publishes it; the sink goes on. Once production stops and
// the sink has caught up, main must hold every offset of the log exactly
// once, and its audit say so. The table keeps few snapshots
// (floe.history.max-snapshots), so both writers' maintenance expires the
// other's snapshots while they run.
func TestReviewReplayWhileSinkWrites(t *testing.T) {
	e := newEnv(t)
	const topic = "busy"
	e.Topic(topic, 2, nil)
	for p := range int32(2) {
		e.Produce(records(topic, p, 100, "a"))
	}
	main := e.Table("lake.busy")
	if err := main.SetProperties(e.Ctx, map[string]string{snapshot.PropMaxSnapshots: "5", "history.expire.min-snapshots-to-keep": "2",
		"history.expire.max-snapshot-age-ms": "1"}); err != nil {
		t.Fatal(err)
	}
	sinkCtx, stopSink := context.WithCancel(e.Ctx)
	defer stopSink()
	sinkDone := make(chan error, 1)
	go func() {
		s, err := connector.NewSink(e.Dial(), main, connector.Config{Topic: topic, FlushRecords: 7, FlushInterval: 20 * time.Millisecond, Logger: quietLogger()})
		if err != nil {
			sinkDone <- err
			return
		}
		_, err = s.Run(sinkCtx)
		sinkDone <- err
	}()
	produceCtx, stopProducing := context.WithCancel(e.Ctx)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; produceCtx.Err() == nil; i++ {
			e.Produce([]*kgo.Record{{Topic: topic, Partition: int32(i % 2), Key: []byte("k"), Value: fmt.Appendf(nil, "live%d", i)}})
			time.Sleep(3 * time.Millisecond)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	res, err := e.replay("lake.busy", replay.Options{Topic: topic, Branch: "rebuild", Publish: true, Sink: connector.Config{FlushRecords: 9}})
	if err != nil || !res.Published {
		stopProducing()
		<-produced
		t.Fatalf("replay onto a branch while the sink writes main: %+v, %v", res, err)
	}
	time.Sleep(300 * time.Millisecond)
	stopProducing()
	<-produced
	want := e.endOffsets(topic)
	deadline := time.Now().Add(20 * time.Second)
	for {
		l, err := e.openExisting("lake.busy", "").Ledger()
		if err != nil {
			t.Fatal(err)
		}
		caught := true
		for tp, end := range want {
			if mapping.Cover(l.Ranges(tp)).Next != end {
				caught = false
			}
		}
		if caught {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sink did not catch up to %v after the publish", want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopSink()
	if err := <-sinkDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("live sink: %v", err)
	}
	tbl := e.openExisting("lake.busy", "")
	checkExactlyOnce(t, tbl, want)
	auditComplete(t, e, tbl, "audit of main after the publish")
}

// TestReviewCreateBranchConflict: the deterministic form of what
// TestReviewReplayWhileSinkWrites meets by chance. A live sink commits on
// main while the replay creates its empty branch; the SQL catalog then
// answers the branch's commit "commit failed, refresh and try again:
// table ... metadata-location moved underneath us" (iceberg-go wraps it in
// table.ErrCommitFailed, the error of that race), and CreateEmptyBranch
// does not try again: the replay fails before it starts, on any table a
// sink writes often. Every other commit of the replay path (the sink's,
// setProperty, Publish) retries such a conflict.
func TestReviewCreateBranchConflict(t *testing.T) {
	e := newEnv(t)
	const topic = "branchrace"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 20, "a"))
	main := e.Table("lake.br")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	cat, ident := e.CatalogOf("lake.br")
	hooked := &commitHook{Catalog: cat,
		match: func(actions, refs []string) bool {
			return len(actions) == 2 && actions[1] == "set-snapshot-ref" && refs[1] == "rebuild"
		},
		hook: func() error {
			// The live sink's commit lands between the catalog's load and
			// its update of the metadata location.
			e.Produce(records(topic, 0, 5, "b"))
			if _, err := e.sink(e.openExisting("lake.br", ""), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
				t.Error(err)
			}
			return fmt.Errorf("%w: table lake.br metadata-location moved underneath us", table.ErrCommitFailed)
		}}
	res, err := replay.Run(e.Ctx, e.Dial(), hooked, ident, replay.Options{Topic: topic, Branch: "rebuild", Sink: connector.Config{Logger: quietLogger()}})
	if err != nil || !res.Complete {
		t.Fatalf("replay onto a branch of a table a sink commits to: %v", err)
	}
}

// TestReviewAuditOfBoundedReplays: the audit of a complete replay says it
// holds the range it claims. A replay --from a time where partition 1 has
// no record at or after the time (its range is empty: [40, 40)), and one
// --from offsets with an explicit --until, audited at the broker level
// (the replay's own start recorded; offsets past its end are lag).
func TestReviewAuditOfBoundedReplays(t *testing.T) {
	e := newEnv(t)
	const topic = "bounded"
	e.Topic(topic, 2, nil)
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range 40 {
		// Partition 0: seconds 0..39; partition 1: seconds 0..3.9.
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "a%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, "b%d", i), Timestamp: base.Add(time.Duration(i) * 100 * time.Millisecond)})
	}
	e.Produce(recs)
	for _, c := range []struct{ name, from, until string }{
		{"time", base.Add(20 * time.Second).UTC().Format(time.RFC3339), "end"},
		{"offsets", "0=10,1=5", "0=30,1=35"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "lake.bounded_" + c.name
			res, err := e.replay(name, replay.Options{Topic: topic, From: bound(t, c.from, topic, true), Until: bound(t, c.until, topic, false)})
			if err != nil || !res.Complete {
				t.Fatalf("replay: %+v, %v", res, err)
			}
			t.Logf("plan [%v, %v)", res.Plan.Start, res.Plan.End)
			rep, err := audit.Run(e.Ctx, e.openExisting(name, ""), audit.Options{Depth: audit.DepthRows, Broker: e.Dial()})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Complete() {
				t.Fatalf("audit of a complete replay [%v, %v): %+v", res.Plan.Start, res.Plan.End, rep.Findings)
			}
		})
	}
}

// TestReviewResumeWithOnDataLossRecord: a replay is interrupted at 50;
// retention then deletes [0, 70), offsets the replay still had to read.
// Run again with --on-data-loss record (the fix the sink's data-loss
// error names), it must record [50, 70) as lost and finish. From earliest
// it does; from offsets (--from 0=30) the plan refuses the start before
// the sink can record anything ("retention deleted everything below 70;
// replay from offset 70 or later"), and --from 0=70 is "another replay's
// target": the replay cannot be finished at all.
func TestReviewResumeWithOnDataLossRecord(t *testing.T) {
	for _, c := range []struct{ name, from string }{
		{"earliest", "earliest"},
		{"offsets", "0=30"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			const topic = "lossy"
			e.Topic(topic, 1, nil)
			e.Produce(records(topic, 0, 100, "a"))
			opts := replay.Options{Topic: topic, From: bound(t, c.from, topic, true), Sink: connector.Config{FlushRecords: 10}}
			res := e.interrupted("lake.lossy", opts)
			if res.Next[0] >= 70 {
				t.Fatalf("interrupted at %d, want below 70", res.Next[0])
			}
			if err := e.Stack.Cluster.DeleteRecords(topic, 0, 70); err != nil {
				t.Fatal(err)
			}
			_, err := e.replay("lake.lossy", opts)
			t.Logf("run again with the default --on-data-loss fail: %v", err)
			opts.Sink.OnDataLoss = connector.LossRecord
			res, err = e.replay("lake.lossy", opts)
			if err != nil || !res.Complete {
				t.Fatalf("run again with --on-data-loss record: complete %v, %v", res.Complete, err)
			}
			if c := coverOf(t, e, "lake.lossy", mapping.TopicPartition{Topic: topic}); c.Next != 100 || len(c.Gaps) != 0 || len(c.Lost) != 1 {
				t.Fatalf("ledger %+v: want up to 100, the deleted offsets recorded lost", c)
			}
		})
	}
}

// TestReviewHeadLossOfAnEmptiedPartition: retention deleted all of
// partition 1 ([0, 10)) before the replay. The plan says so (HeadLost
// 1=10, printed as "the ledger records it as lost"); the ledger must then
// record [0, 10) of partition 1 as lost, as it does for a partition with
// records left.
func TestReviewHeadLossOfAnEmptiedPartition(t *testing.T) {
	e := newEnv(t)
	const topic = "emptied"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 20, "a"))
	e.Produce(records(topic, 1, 10, "a"))
	if err := e.Stack.Cluster.DeleteRecords(topic, 1, 10); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.emptied", replay.Options{Topic: topic})
	if err != nil || !res.Complete {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if res.Plan.HeadLost[1] != 10 {
		t.Fatalf("plan head lost %v, want 1=10", res.Plan.HeadLost)
	}
	c := coverOf(t, e, "lake.emptied", mapping.TopicPartition{Topic: topic, Partition: 1})
	if c.First != 0 || c.Next != 10 || len(c.Lost) != 1 {
		t.Fatalf("ledger of partition 1: %+v; want [0, 10) recorded lost, as the replay said", c)
	}
}

// TestReviewResumeSaysHeadLost: a replay from earliest read [0, 50) of a
// log starting at 0 and was interrupted; retention then deleted [0, 30).
// Resumed, the plan names partition 0 in HeadLost ("retention deleted
// [0, log start) before the replay, and the ledger records it as lost";
// the command prints "note: ... retention deleted [0, 30) before this
// replay; the ledger records it as lost"), though the target holds those
// 30 offsets as rows and the ledger records nothing lost.
func TestReviewResumeSaysHeadLost(t *testing.T) {
	e := newEnv(t)
	const topic = "laterloss"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	res := e.interrupted("lake.laterloss", replay.Options{Topic: topic, Sink: connector.Config{FlushRecords: 40}})
	if res.Next[0] < 30 {
		t.Fatalf("interrupted at %d, want at 30 or later", res.Next[0])
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 30); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.laterloss", replay.Options{Topic: topic})
	if err != nil || !res.Complete {
		t.Fatalf("resume: %+v, %v", res, err)
	}
	c := coverOf(t, e, "lake.laterloss", mapping.TopicPartition{Topic: topic})
	if len(c.Lost) != 0 || c.Records != 100 {
		t.Fatalf("ledger %+v, want 100 rows and nothing lost", c)
	}
	if len(res.Plan.HeadLost) != 0 {
		t.Fatalf("resumed replay reports head lost %v (printed as \"the ledger records it as lost\"), but the target holds [0, 30) as rows and its ledger records nothing lost", res.Plan.HeadLost)
	}
}

// TestReviewDebeziumBranchPublish: a Debezium capture sunk into an upsert
// table keyed by the key's fields (flushes of 37), rebuilt on a branch with
// other flush boundaries (53) and --publish: the comparison must find them
// equal (the fold does not depend on where flushes cut), publish, and the
// published table audit complete at the row level.
func TestReviewDebeziumBranchPublish(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.customers"
	e.Topic(topic, 2, nil)
	c := floetest.NewCustomers(topic, 2)
	c.Story(40, 200, 7)
	e.Produce(c.Records(t, floetest.CDCConnectJSON, e.Stack.Registry))
	layout := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON, Envelope: mapping.EnvelopeDebezium}
	if err := layout.Normalize(); err != nil {
		t.Fatal(err)
	}
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	tbl, dlq := e.TableWithDeadLetters("lake.customers", snapshot.OpenOptions{Create: true, Layout: layout, Mode: mapping.ModeUpsert, Key: &key})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 37, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.customers", replay.Options{Topic: topic, Branch: "rebuild", Publish: true, Mode: mapping.ModeUpsert, Layout: layout,
		Sink: connector.Config{FlushRecords: 53}})
	if err != nil || !res.Published || !res.Compared {
		t.Fatalf("replay of a Debezium table onto a branch, published: compared %v published %v, %v", res.Compared, res.Published, err)
	}
	main := e.openExisting("lake.customers", "")
	c.CheckTable(t, rows(t, main), floetest.CDCConnectJSON, true)
	auditComplete(t, e, main, "audit after publish")
}

// TestReviewBranchReplayOutlivesMainMaintenance: a replay onto a branch is
// interrupted after several commits; a sink then commits often on main,
// and its maintenance (floe.history.max-snapshots 5) expires snapshots.
// The replay, run again, must still find its branch's ledger, finish, and
// publish a table that audits complete.
func TestReviewBranchReplayOutlivesMainMaintenance(t *testing.T) {
	e := newEnv(t)
	const topic = "expiring"
	e.Topic(topic, 2, nil)
	for p := range int32(2) {
		e.Produce(records(topic, p, 60, "a"))
	}
	main := e.Table("lake.exp")
	if err := main.SetProperties(e.Ctx, map[string]string{snapshot.PropMaxSnapshots: "5", "history.expire.min-snapshots-to-keep": "2",
		"history.expire.max-snapshot-age-ms": "1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	cat, ident := e.CatalogOf("lake.exp")
	ctx, cancel := context.WithCancel(e.Ctx)
	var commits int
	opts := replay.Options{Topic: topic, Branch: "rebuild", Publish: true, Sink: connector.Config{FlushRecords: 4, Logger: quietLogger(),
		OnCommit: func(snapshot.Result) {
			if commits++; commits == 12 {
				cancel()
			}
		}}}
	res, err := replay.Run(ctx, e.Dial(), cat, ident, opts)
	cancel()
	if err != nil || res.Complete {
		t.Fatalf("interrupted replay: complete %v, %v", res.Complete, err)
	}
	// The live sink on main: many small commits, its maintenance running.
	for p := range int32(2) {
		e.Produce(records(topic, p, 60, "b"))
	}
	st, err := e.sink(e.openExisting("lake.exp", ""), connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("main sink: %d commits, %d maintenance runs; snapshots in the metadata now %d", st.Commits, st.Maintenance, len(e.openExisting("lake.exp", "").Iceberg().Metadata().Snapshots()))
	opts.Sink.OnCommit = nil
	res, err = e.replay("lake.exp", opts)
	if err != nil || !res.Complete || !res.Resumed || !res.Published {
		t.Fatalf("resumed replay: complete %v resumed %v published %v, %v", res.Complete, res.Resumed, res.Published, err)
	}
	tbl := e.openExisting("lake.exp", "")
	checkExactlyOnce(t, tbl, map[mapping.TopicPartition]int64{{Topic: topic, Partition: 0}: 60, {Topic: topic, Partition: 1}: 60})
	auditComplete(t, e, tbl, "audit after publish")
}

// everyHook wraps a catalog: before each of the first n commits whose
// updates match, it runs hook (a commit of another writer).
type everyHook struct {
	icecat.Catalog
	match func(actions, refs []string) bool
	n     int
	hook  func()
	log   func(actions, refs []string, err error)
}

// LoadTable returns the table bound to the wrapper, so that commits made
// through it (transactions, retries) pass the hook too.
func (c *everyHook) LoadTable(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := c.Catalog.LoadTable(ctx, ident)
	if err != nil {
		return nil, err
	}
	return table.New(tbl.Identifier(), tbl.Metadata(), tbl.MetadataLocation(), tbl.FS, c), nil
}

func (c *everyHook) CommitTable(ctx context.Context, ident table.Identifier, reqs []table.Requirement, updates []table.Update) (table.Metadata, string, error) {
	var actions, refs []string
	for _, up := range updates {
		b, _ := json.Marshal(up)
		var u struct {
			Action string `json:"action"`
			Ref    string `json:"ref-name"`
		}
		_ = json.Unmarshal(b, &u)
		actions, refs = append(actions, u.Action), append(refs, u.Ref)
	}
	if c.n > 0 && c.match(actions, refs) {
		c.n--
		c.hook()
	}
	m, loc, err := c.Catalog.CommitTable(ctx, ident, reqs, updates)
	if c.log != nil {
		c.log(actions, refs, err)
	}
	return m, loc, err
}

// TestReviewBranchCommitSequenceRace: a replay onto a branch while a sink
// commits often on main. The branch's commit asserts only the branch's
// head; a main commit that landed since it loaded the table took the
// table's next sequence number, and the catalog answers "can't add
// snapshot with sequence number N, must be > than last sequence number N".
// That is a conflict (reload and retry), but the commit path counts it as
// a storage or catalog failure, of which it allows 5: a replay beside a
// busy sink gives up ("gave up after 7 attempts") where a conflict gets 30
// attempts. TestReviewReplayWhileSinkWrites meets it by chance (1 run in 6
// once branch creation retries); here each of the replay's first 6
// commit attempts on the branch races one main commit.
func TestReviewBranchCommitSequenceRace(t *testing.T) {
	e := newEnv(t)
	const topic = "seqrace"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 40, "a"))
	main := e.Table("lake.seq")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	// The branch exists already (a replay interrupted before its first
	// commit), so every matching commit is one of the replay's sink.
	if err := main.CreateEmptyBranch(e.Ctx, "rebuild"); err != nil {
		t.Fatal(err)
	}
	cat, ident := e.CatalogOf("lake.seq")
	hooked := &everyHook{Catalog: cat, n: 6, log: func(actions, refs []string, err error) { t.Logf("commit %v %v: %v", actions, refs, err) },
		match: func(actions, refs []string) bool {
			return slices.Contains(actions, "add-snapshot") && slices.Contains(refs, "rebuild")
		},
		hook: func() {
			e.Produce(records(topic, 0, 1, "live"))
			if _, err := e.sink(e.openExisting("lake.seq", ""), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
				t.Error(err)
			}
		}}
	res, err := replay.Run(e.Ctx, e.Dial(), hooked, ident, replay.Options{Topic: topic, Branch: "rebuild", Sink: connector.Config{Logger: quietLogger()}})
	if err != nil || !res.Complete {
		t.Fatalf("replay onto a branch while main's sink commits: %v", err)
	}
}

// TestReviewResumeAfterTopicRecreated: a replay is interrupted; the topic
// is then deleted and created again (a new topic ID) and holds other
// records. Running the replay again must not continue the old ledger with
// the new log's records (the ledger records the topic's ID for this): it
// must refuse, naming the recreated topic.
func TestReviewResumeAfterTopicRecreated(t *testing.T) {
	e := newEnv(t)
	const topic = "reborn"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "old"))
	opts := replay.Options{Topic: topic, Sink: connector.Config{FlushRecords: 10}}
	res := e.interrupted("lake.reborn", opts)
	if _, err := e.Dial().Admin().DeleteTopics(e.Ctx, topic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "new"))
	res, err := e.replay("lake.reborn", opts)
	if err == nil {
		var mixed int
		for _, r := range rows(t, e.openExisting("lake.reborn", "")) {
			if len(r.Value) >= 3 && r.Value[:3] == "new" {
				mixed++
			}
		}
		t.Fatalf("replay resumed onto a recreated topic: complete %v, %d rows of the new topic's log beside the old one's", res.Complete, mixed)
	}
	t.Logf("refused: %v", err)
}

// TestPublishReconcilesDeadLetters: an upsert table whose sink made a
// dead letter, rebuilt on a branch (whose dead letters go to a table of
// its own) and published: main's ledger is the branch's then, and the
// dead letters of main's earlier commits belong to no ledger. The audit
// called the table NOT COMPLETE (stray dead letters) until a sink session
// or floe maintain reconciled them; the publish reconciles them now.
// Found by a new-user run.
func TestPublishReconcilesDeadLetters(t *testing.T) {
	e := newEnv(t)
	const topic = "customers-dead"
	e.Topic(topic, 1, nil)
	e.Produce([]*kgo.Record{
		{Topic: topic, Key: []byte(`{"id":1}`), Value: []byte(`{"name":"ann"}`)},
		{Topic: topic, Key: []byte(`nokey`), Value: []byte(`{"id":4}`)},
	})
	layout := mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON}
	if err := layout.Normalize(); err != nil {
		t.Fatal(err)
	}
	key := mapping.UpsertKey{Source: mapping.KeyFromKeyFields}
	tbl, dlq := e.TableWithDeadLetters("lake.customers", snapshot.OpenOptions{Create: true, Layout: layout, Mode: mapping.ModeUpsert, Key: &key})
	if st, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil || st.DeadLetters != 1 {
		t.Fatalf("sink %+v, %v; want a dead letter", st, err)
	}
	res, err := e.replay("lake.customers", replay.Options{Topic: topic, Branch: "rebuild", Publish: true, Mode: mapping.ModeUpsert, Layout: layout})
	if err != nil || !res.Published {
		t.Fatalf("replay onto a branch, published: %+v, %v", res, err)
	}
	auditComplete(t, e, e.openExisting("lake.customers", ""), "audit after publish")
}

// auditComplete fails t, naming what, unless the audit of tbl at the rows
// level is complete.
func auditComplete(t *testing.T, e *env, tbl *snapshot.Table, what string) {
	t.Helper()
	rep, err := audit.Run(e.Ctx, tbl, audit.Options{Depth: audit.DepthRows})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete() {
		t.Fatalf("%s: %+v", what, rep.Findings)
	}
}

// coverOf is the coverage of tp in the ledger of table name's main.
func coverOf(t *testing.T, e *env, name string, tp mapping.TopicPartition) mapping.Coverage {
	t.Helper()
	l, err := e.openExisting(name, "").Ledger()
	if err != nil {
		t.Fatal(err)
	}
	return mapping.Cover(l.Ranges(tp))
}

// produceSeconds produces n records into partition 0 of topic, one second
// of record time apart from the base it returns.
func (e *env) produceSeconds(topic string, n int) time.Time {
	base := time.UnixMilli(1_700_000_000_000)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)}
	}
	e.Produce(recs)
	return base
}
