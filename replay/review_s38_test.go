package replay_test

// Adversarial review s38 of today's replay/publish fixes. Each test states
// the promise it checks; the ones that fail are findings.

import (
	"fmt"
	"time"

	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestS38PublishDropsEmptyReplayedPartition: main sank partition 0
// [0, 60) and partition 1 [0, 20); retention then deleted partition 1
// whole. A replay --from 0=0,1=20 (partition 1 starts at its log start,
// which is its end: nothing to read) onto a branch has no ledger entry for
// partition 1, and mainRowsLost treats a partition the branch lacks as
// "everything at or after its next offset 0 is read again": publish is
// allowed and main loses partition 1's 20 committed rows, which no sink
// can bring back. The same replay --from 0=0,1=10 (with the log holding
// partition 1) is refused for [0, 10); a start at the end must be too.
func TestS38PublishDropsEmptyReplayedPartition(t *testing.T) {
	e := newEnv(t)
	const topic = "emptypub"
	e.Topic(topic, 2, nil)
	e.Produce(records(topic, 0, 60, "a"))
	e.Produce(records(topic, 1, 20, "a"))
	main := e.Table("lake.emptypub")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 1, 20); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.emptypub", replay.Options{Topic: topic, From: bound(t, "0=0,1=20", topic, true), Branch: "rebuild", Publish: true})
	t.Logf("replay: published %v, start %v, end %v, err %v", res.Published, res.Plan.Start, res.Plan.End, err)
	got := rows(t, e.openExisting("lake.emptypub", ""))
	if len(got) != 80 {
		t.Fatalf("main holds %d rows after the replay --publish, want the 80 it had committed (published %v: partition 1's [0, 20) is gone from main and from the log)", len(got), res.Published)
	}
}

// TestS38PublishDropsOtherTopic: main holds two topics (two sinks into one
// table). A replay of one of them onto a branch, published, replaces main
// by a branch that holds none of the other topic's rows: mainRowsLost
// takes a topic the branch lacks for one it reads again from offset 0.
// Once retention deleted the other topic's records, they are gone.
func TestS38PublishDropsOtherTopic(t *testing.T) {
	e := newEnv(t)
	const a, b = "twoa", "twob"
	e.Topic(a, 1, nil)
	e.Topic(b, 1, nil)
	e.Produce(records(a, 0, 30, "a"))
	e.Produce(records(b, 0, 20, "b"))
	main := e.Table("lake.two")
	if _, err := e.sink(main, connector.Config{Topic: a, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sink(e.openExisting("lake.two", ""), connector.Config{Topic: b, StopAtEnd: true}); err != nil {
		t.Fatalf("second topic into the same table: %v", err)
	}
	if n := len(rows(t, e.openExisting("lake.two", ""))); n != 50 {
		t.Fatalf("main holds %d rows, want 50", n)
	}
	if err := e.Stack.Cluster.DeleteRecords(b, 0, 20); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.two", replay.Options{Topic: a, Branch: "rebuild", Publish: true})
	t.Logf("replay: published %v, err %v", res.Published, err)
	got := rows(t, e.openExisting("lake.two", ""))
	if len(got) != 50 {
		t.Fatalf("main holds %d rows after the replay of %s --publish, want the 50 it had committed (published %v: topic %s's 20 rows are gone)", len(got), a, res.Published, b)
	}
	_ = mapping.TopicPartition{}
}

// TestS38PublishAfterRetentionPassedBranchNext: main sank [0, 100). A
// replay --until 0=50 onto a branch is built (no --publish yet: to look
// at it first); retention then deletes [0, 70). Publishing the branch (the
// same command with --publish) passes mainRowsLost, which takes every
// offset at or after the branch's next (50) for one a sink on main reads
// again; but the log no longer holds [50, 70): main loses 20 committed
// rows for good (its sink then resumes at 50, below the log start).
func TestS38PublishAfterRetentionPassedBranchNext(t *testing.T) {
	e := newEnv(t)
	const topic = "laterpub"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 100, "a"))
	main := e.Table("lake.laterpub")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	opts := replay.Options{Topic: topic, Until: bound(t, "0=50", topic, false), Branch: "rebuild"}
	if res, err := e.replay("lake.laterpub", opts); err != nil || !res.Complete {
		t.Fatalf("replay onto the branch: %+v, %v", res, err)
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 70); err != nil {
		t.Fatal(err)
	}
	opts.Publish = true
	res, err := e.replay("lake.laterpub", opts)
	t.Logf("publish: published %v, err %v", res.Published, err)
	got := rows(t, e.openExisting("lake.laterpub", ""))
	if len(got) != 100 && res.Published {
		// What a sink on main can still read back: [70, 100).
		if _, err := e.sink(e.openExisting("lake.laterpub", ""), connector.Config{Topic: topic, StopAtEnd: true, OnDataLoss: connector.LossRecord}); err != nil {
			t.Logf("sink on main after the publish: %v", err)
		}
		got = rows(t, e.openExisting("lake.laterpub", ""))
		t.Fatalf("main holds %d rows after the publish and a sink's catch-up, want the 100 it had committed (the log holds only [70, 100) now)", len(got))
	}
}

// TestS38NewTimeReplayTakenForResume: a replay --from T0 (offset 30) into
// lake.times is complete; retention then deletes [0, 40). Another replay
// into the same table --from T1 (offset 35's time, later than T0) is a
// different replay ("a table or branch holding a different replay —
// another topic or another start — is refused"): it asks for the records
// at or after T1, and the target holds five before it. newPlan takes any
// time that resolves to the log start for the start the target holds, so
// it is accepted as a resume and reported complete.
func TestS38NewTimeReplayTakenForResume(t *testing.T) {
	e := newEnv(t)
	const topic = "times"
	e.Topic(topic, 1, nil)
	base := e.produceSeconds(topic, 100)
	at := func(i int) string { return base.Add(time.Duration(i) * time.Second).UTC().Format(time.RFC3339) }
	if res, err := e.replay("lake.times", replay.Options{Topic: topic, From: bound(t, at(30), topic, true)}); err != nil || !res.Complete || res.Plan.Start[0] != 30 {
		t.Fatalf("replay from T0: %+v, %v", res, err)
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 40); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.times", replay.Options{Topic: topic, From: bound(t, at(35), topic, true)})
	if err == nil {
		t.Fatalf("replay --from %s (offset 35) into a table holding the replay from offset 30: accepted as a resume (resumed %v, start %v, complete %v); want refused as another replay's target", at(35), res.Resumed, res.Plan.Start, res.Complete)
	}
	t.Logf("refused: %v", err)
}

// TestS38RowAtFoldLatestWithDeletes: rowAt projects the offset column of an
// upsert table keyed by the Kafka key (--fold latest) holding equality
// deletes, which the fix left projected; RowAt must find the row of the
// newest record of a key that was written several times.
func TestS38RowAtFoldLatestWithDeletes(t *testing.T) {
	e := newEnv(t)
	const topic = "rowat"
	e.Topic(topic, 2, nil)
	keyedLog(e, topic)
	if res, err := e.replay("lake.rowat", replay.Options{Topic: topic, Fold: mapping.FoldLatest, Sink: connector.Config{FlushRecords: 40}}); err != nil || !res.Complete {
		t.Fatalf("fold: %+v, %v", res, err)
	}
	tbl := e.openExisting("lake.rowat", "")
	if n := tbl.Head().Summary.Properties["total-equality-deletes"]; n == "" || n == "0" {
		t.Fatalf("no equality deletes in the table (%v)", tbl.Head().Summary.Properties)
	}
	// Offset 298 of partition 0 (i = 298: key k%02d of (298*7)%12) is a
	// key's newest record.
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	file, ok, err := tbl.RowAt(e.Ctx, 0, tp, 149, snapshot.Result{}.Commit)
	if err != nil || !ok {
		t.Fatalf("RowAt %s@149 of a --fold latest table with equality deletes: file %q ok %v, %v", tp, file, ok, err)
	}
}

// TestS38RepublishAfterRollback: a replay onto branch rebuild was
// published; the operator then rolled main back to its head before the
// publish (another engine's rollback_to_snapshot: the publish turned out
// premature). Running the publish again must publish: main does not
// descend from the branch's head any more, so nothing of main's is
// dropped. floe.published.rebuild alone makes it "published before" (exit
// 0, main left at the rolled-back head), though the message says main
// "has moved on from the branch's head".
func TestS38RepublishAfterRollback(t *testing.T) {
	e := newEnv(t)
	const topic = "rollback"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	main := e.Table("lake.rb")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	before := e.openExisting("lake.rb", "").Head().SnapshotID
	opts := replay.Options{Topic: topic, Branch: "rebuild", Publish: true}
	res, err := e.replay("lake.rb", opts)
	if err != nil || !res.Published {
		t.Fatalf("first publish: %+v, %v", res, err)
	}
	// Roll main back.
	cat, ident := e.CatalogOf("lake.rb")
	tbl := e.openExisting("lake.rb", "")
	meta := tbl.Iceberg().Metadata()
	head := tbl.Head().SnapshotID
	if _, _, err := cat.CommitTable(e.Ctx, ident,
		[]table.Requirement{table.AssertRefSnapshotID(table.MainBranch, &head)},
		[]table.Update{table.NewSetSnapshotRefUpdate(table.MainBranch, before, table.BranchRef, 0, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	_ = meta
	res, err = e.replay("lake.rb", opts)
	t.Logf("again: published %v, published before %v, main %d -> %d, err %v", res.Published, res.PublishedBefore, res.MainFrom, res.MainTo, err)
	if got := e.openExisting("lake.rb", "").Head().SnapshotID; got != res.Head || !res.Published {
		t.Fatalf("main at %d after publishing branch head %d again over a main rolled back to %d: published %v, published before %v", got, res.Head, before, res.Published, res.PublishedBefore)
	}
}

// TestS38RepublishAfterExpiry: the same command run again once main moved
// on and expiry removed main's history down to the publish is still
// "published before" (main keeps its newer commits). A check of the fix of
// TestS38RepublishAfterRollback.
func TestS38RepublishAfterExpiry(t *testing.T) {
	e := newEnv(t)
	const topic = "expired"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	main := e.Table("lake.ex")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	opts := replay.Options{Topic: topic, Branch: "rebuild", Publish: true}
	if res, err := e.replay("lake.ex", opts); err != nil || !res.Published {
		t.Fatalf("first publish: %+v, %v", res, err)
	}
	for i := range 4 {
		e.Produce(records(topic, 0, 10, fmt.Sprintf("b%d", i)))
		if _, err := e.sink(e.openExisting("lake.ex", ""), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.openExisting("lake.ex", "").Maintain(e.Ctx, snapshot.MaintainOptions{Expire: true, RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.ex", opts)
	if err != nil || res.Published || !res.PublishedBefore {
		t.Fatalf("again after expiry: published %v, published before %v, %v", res.Published, res.PublishedBefore, err)
	}
	if n := len(rows(t, e.openExisting("lake.ex", ""))); n != 90 {
		t.Fatalf("main holds %d rows, want 90", n)
	}
}

// TestPublishWithEmptyPartitions: a topic of three partitions, two of
// which never had a record: main's ledger holds empty ranges of them
// ([0, 0), where the sink started them). A replay of the whole topic onto
// a branch holds the same, and publishing it drops nothing: it was refused
// for "main holds sparse/1 [0, 0)", which only --publish-different got
// past. From a new-user run.
func TestPublishWithEmptyPartitions(t *testing.T) {
	e := newEnv(t)
	const topic = "sparse"
	e.Topic(topic, 3, nil)
	e.Produce(records(topic, 0, 20, "a"))
	main := e.Table("lake.sparse")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.sparse", replay.Options{Topic: topic, Branch: "rb", Publish: true})
	if err != nil || !res.Published {
		t.Fatalf("replay --branch --publish: published %v, %v", res.Published, err)
	}
	if got := rows(t, e.openExisting("lake.sparse", "")); len(got) != 20 {
		t.Fatalf("main holds %d rows after the publish, want 20", len(got))
	}
}
