package replay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestFromTimeResumeAfterCompaction (from a review): a compacted topic,
// offsets 0-29 stamped base+0s.., keys k0..k29 except that offset 20
// writes k5 again. A replay --from base+5s starts at offset 5 and is
// interrupted after its first commit. Compaction then removes offset 5.
// The same command run again continues the replay from offset 5; it was
// refused ("the time resolves to offset 6 now ... run it again with
// --until end", which was what was run), so the replay could never finish.
func TestFromTimeResumeAfterCompaction(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpresume"
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i := range 30 {
		k := fmt.Sprintf("k%d", i)
		if i == 20 {
			k = "k5"
		}
		e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(k), Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)}})
	}
	from := bound(t, base.Add(5*time.Second).UTC().Format(time.RFC3339), topic, true)
	cat, ident := e.CatalogOf("lake.cmpresume")
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	var commits atomic.Int32
	res, err := replay.Run(ctx, e.Dial(), cat, ident, replay.Options{Topic: topic, From: from, Sink: connector.Config{FlushRecords: 5, Logger: quietLogger(),
		OnCommit: func(snapshot.Result) {
			if commits.Add(1) == 2 {
				cancel()
			}
		}}})
	if err != nil || res.Complete || res.Plan.Start[0] != 5 {
		t.Fatalf("interrupted replay: start %v, complete %v, %v; want an incomplete run from offset 5", res.Plan.Start, res.Complete, err)
	}
	e.Stack.Cluster.Compact()
	offs, _ := e.Dial().OffsetsForTime(e.Ctx, topic, from.Time)
	t.Logf("after compaction the time lists offset %v", offs)
	res, err = e.replay("lake.cmpresume", replay.Options{Topic: topic, From: from})
	t.Logf("second run: plan %v..%v resumed %v fixed %v; rows %d", res.Plan.Start, res.Plan.End, res.Resumed, res.FixedEnd, len(rows(t, e.openExisting("lake.cmpresume", ""))))
	if err != nil || !res.Complete {
		t.Fatalf("the same replay run again after compaction removed its start record: complete %v, %v", res.Complete, err)
	}
}

// TestFromOffsetsRunAgainAfterRetention (from a review): a replay --from
// 0=5 of a topic of two partitions starts partition 0 at 5 and partition 1
// (not named) at its log start, 0, and completes. Retention then deletes
// [0, 10) of partition 1, records the replay already holds. The same
// command run again says the replay is complete (docs/replay.md: "A
// partition the target already started keeps its start, also once
// retention has deleted it since"); partition 1 "started" at 10 and the
// target was refused as another replay's.
func TestFromOffsetsRunAgainAfterRetention(t *testing.T) {
	e := newEnv(t)
	const topic = "offret"
	e.Topic(topic, 2, nil)
	for p := range int32(2) {
		e.Produce(records(topic, p, 20, "a"))
	}
	opts := replay.Options{Topic: topic, From: bound(t, "0=5", topic, true)}
	res, err := e.replay("lake.offret", opts)
	if err != nil || !res.Complete {
		t.Fatalf("replay --from 0=5: %+v, %v", res, err)
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 1, 10); err != nil {
		t.Fatal(err)
	}
	res, err = e.replay("lake.offret", opts)
	if err != nil || !res.Complete || res.Stats.Commits != 0 {
		t.Fatalf("the complete replay --from 0=5 run again after retention deleted offsets it holds: complete %v, commits %d, %v", res.Complete, res.Stats.Commits, err)
	}
}

// TestUntilTimeRunAgainAfterRetention (from a review): a replay --until
// base+50s
// (offsets 0-99 stamped base+0s..) ends at offset 50 and completes.
// Retention then deletes [0, 80): the records at or after the time that
// the replay left out. The same command run again (the same --until) must
// say the replay is complete, as docs/replay.md says of a complete replay
// run again. The time resolved to 80 then, the first record retention
// kept, and the replay failed on data loss (with --on-data-loss record it
// recorded [50, 80) lost); the target records the time its end came from
// (floe.replay.until-time), and the same time keeps that end. Another
// time replaces it.
func TestUntilTimeRunAgainAfterRetention(t *testing.T) {
	e := newEnv(t)
	const topic = "untilret"
	e.Topic(topic, 1, nil)
	base := e.produceSeconds(topic, 100)
	opts := replay.Options{Topic: topic, Until: bound(t, base.Add(50*time.Second).UTC().Format(time.RFC3339), topic, false)}
	res, err := e.replay("lake.untilret", opts)
	if err != nil || !res.Complete || res.Plan.End[0] != 50 {
		t.Fatalf("replay --until base+50s: end %v, complete %v, %v", res.Plan.End, res.Complete, err)
	}
	if err := e.Stack.Cluster.DeleteRecords(topic, 0, 80); err != nil {
		t.Fatal(err)
	}
	res, err = e.replay("lake.untilret", opts)
	if err != nil || !res.Complete || res.Stats.Commits != 0 {
		t.Fatalf("the complete replay --until base+50s run again after retention deleted [0, 80): end %v, complete %v, commits %d, %v; want it complete, nothing written",
			res.Plan.End, res.Complete, res.Stats.Commits, err)
	}
	later := replay.Options{Topic: topic, Until: bound(t, base.Add(90*time.Second).UTC().Format(time.RFC3339), topic, false), Sink: connector.Config{OnDataLoss: connector.LossRecord}}
	if res, err = e.replay("lake.untilret", later); err != nil || !res.Complete || res.Plan.End[0] != 90 {
		t.Fatalf("replay taken further --until base+90s: end %v, complete %v, %v", res.Plan.End, res.Complete, err)
	}
}
