package replay_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// A replay is a finite job: the default --until is the end offsets when it
// starts. Interrupted and run again after the log grew, it continues to
// that end, not the new one; complete and run again, it reads and writes
// nothing; an explicit --until takes it further. On a new table and on a
// branch of an existing one.
func TestReplayRunAgainKeepsItsEnd(t *testing.T) {
	for _, c := range []struct{ name, table, branch string }{
		{"new table", "lake.fixed", ""},
		{"branch", "lake.live", "rebuild"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			const topic = "grow"
			e.Topic(topic, 2, nil)
			for p := range int32(2) {
				e.Produce(records(topic, p, 60, "a"))
			}
			if c.branch != "" {
				if _, err := e.sink(e.Table(c.table), connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
					t.Fatal(err)
				}
			}
			cat, err := catalog.Open(e.Ctx, e.Stack.Catalog())
			if err != nil {
				t.Fatal(err)
			}
			ident, _ := catalog.ParseIdent(c.table)
			ctx, cancel := context.WithCancel(e.Ctx)
			defer cancel()
			var commits atomic.Int32
			opts := replay.Options{Topic: topic, Branch: c.branch, Sink: connector.Config{FlushRecords: 25, Logger: quietLogger(),
				OnCommit: func(snapshot.Result) {
					if commits.Add(1) == 1 {
						cancel()
					}
				}}}
			res, err := replay.Run(ctx, e.Dial(), cat, ident, opts)
			if err != nil || res.Complete {
				t.Fatalf("interrupted replay: complete %v, %v; want an incomplete run", res.Complete, err)
			}
			if res.Plan.End[0] != 60 || res.Plan.End[1] != 60 || res.FixedEnd {
				t.Fatalf("first run: end %v (fixed %v), want 60 per partition from the log", res.Plan.End, res.FixedEnd)
			}
			opts.Sink.OnCommit = nil

			// The log grows; the same replay continues to its own end.
			for p := range int32(2) {
				e.Produce(records(topic, p, 40, "b"))
			}
			res, err = e.replay(c.table, opts)
			if err != nil || !res.Complete || !res.Resumed || !res.FixedEnd {
				t.Fatalf("resumed replay: %+v, %v", res, err)
			}
			want := map[mapping.TopicPartition]int64{{Topic: topic, Partition: 0}: 60, {Topic: topic, Partition: 1}: 60}
			tbl := e.openExisting(c.table, c.branch)
			if rs := checkExactlyOnce(t, tbl, want); len(rs) != 120 {
				t.Fatalf("resumed replay holds %d rows, want the 120 of its end", len(rs))
			}
			head := tbl.Head().SnapshotID

			// Complete: run again, nothing is read or written.
			res, err = e.replay(c.table, opts)
			if err != nil || !res.Complete || !res.Resumed || res.Remaining != 0 || res.Stats.Commits != 0 || res.Stats.Records != 0 || res.Head != head {
				t.Fatalf("complete replay run again: %+v, %v; want a no-op at head %d", res, err, head)
			}
			if got := e.openExisting(c.table, c.branch).Head().SnapshotID; got != head {
				t.Fatalf("complete replay run again moved the head from %d to %d", head, got)
			}

			// An explicit --until takes it further, and becomes its end.
			opts.Until = bound(t, "0=100,1=100", topic, false)
			res, err = e.replay(c.table, opts)
			if err != nil || !res.Complete || res.Stats.Records != 80 {
				t.Fatalf("replay to --until 0=100,1=100: %+v, %v", res, err)
			}
			opts.Until = replay.Bound{}
			res, err = e.replay(c.table, opts)
			if err != nil || !res.Complete || !res.FixedEnd || res.Stats.Commits != 0 || res.Plan.End[0] != 100 {
				t.Fatalf("run again after --until: %+v, %v", res, err)
			}
			want = map[mapping.TopicPartition]int64{{Topic: topic, Partition: 0}: 100, {Topic: topic, Partition: 1}: 100}
			checkExactlyOnce(t, e.openExisting(c.table, c.branch), want)
		})
	}
}
