package replay_test

import (
	"errors"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/replay"
)

// TestPublishFullHistoryOverCompactedRows (from a review): main, an append table
// of a compacted topic, was started at the latest offset (5) and holds
// [5, 15) as 10 rows. The team then rebuilds the whole history from the
// earliest offset onto a branch and publishes it. Compaction removed 3 of
// the records main holds rows of (key d was written 4 times) since main
// read them, so the branch holds 7 rows of [5, 15), where main holds 10:
// publishing drops 3 rows no log holds any more. mainRowsFewer counts the
// branch's rows of every range touching [5, 15): the branch's one range
// [0, 15) also holds the 5 rows below 5, so "at most 12 on the branch"
// hides the 3 missing ones, and the publish goes ahead; every audit of
// main then says complete.
func TestPublishFullHistoryOverCompactedRows(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpfull"
	produce := e.compactedTopic(topic)
	produce(0, "a", "b", "c", "e", "f")
	main := e.Table("lake.cmpfull")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true, Start: connector.StartLatest}); err != nil {
		t.Fatal(err)
	}
	produce(5, "d", "d", "d", "d", "x1", "x2", "x3", "x4", "x5", "x6")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(rows(t, e.openExisting("lake.cmpfull", ""))); n != 10 {
		t.Fatalf("main holds %d rows before compaction, want 10", n)
	}
	e.Stack.Cluster.Compact()
	res, err := e.replay("lake.cmpfull", replay.Options{Topic: topic, Branch: "full", Publish: true})
	have := map[int64]bool{}
	for _, r := range rows(t, e.openExisting("lake.cmpfull", "")) {
		have[r.Offset] = true
	}
	var gone []int64
	for o := int64(5); o < 15; o++ {
		if !have[o] {
			gone = append(gone, o)
		}
	}
	if _, ok := errors.AsType[*replay.DifferError](err); !ok || res.Published {
		t.Fatalf("%s; publish of a full-history replay of a compacted topic: err %v, published %v; main lost the rows of offsets %v, which it held and no log holds any more; want the publish refused (main holds 10 rows of [5, 15), the branch fewer)",
			e.mainVerdict("lake.cmpfull"), err, res.Published, gone)
	}
}
