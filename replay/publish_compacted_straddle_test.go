package replay_test

import (
	"errors"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/replay"
)

// TestPublishRefusesRowsCompactedAwayBelowStraddlingRange (from a review): as
// TestPublishRefusesRowsCompactedAway, but main is ahead of the branch
// (the documented "--until ended the replay earlier" case, or a live sink
// that committed past the replay's end): main's one range [0, 10) holds
// 10 records over 10 offsets, so every offset of it is a row, and main
// certainly holds 7 rows below the branch's end 7. Compaction removed
// offsets 1 and 2 since main read them; the branch holds 5 rows of
// [0, 7). Publishing drops the rows of offsets 1 and 2, which no log
// holds any more. mainRowsFewer counts only main's ranges wholly inside
// the shared offsets [0, 7): none, so main "holds at least 0" and the
// publish goes ahead.
func TestPublishRefusesRowsCompactedAwayBelowStraddlingRange(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpstraddle"
	e.compactedTopic(topic)(0, "u0", "k1", "k2", "k1", "k2", "z", "y", "x", "w", "v")
	main := e.Table("lake.cmpstraddle")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(rows(t, e.openExisting("lake.cmpstraddle", ""))); n != 10 {
		t.Fatalf("main holds %d rows before compaction, want 10", n)
	}
	e.Stack.Cluster.Compact()
	until, err := replay.ParseBound("0=7", topic, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.cmpstraddle", replay.Options{Topic: topic, Until: until, Branch: "rebuild", Publish: true})
	var kept []int64
	for _, r := range rows(t, e.openExisting("lake.cmpstraddle", "")) {
		kept = append(kept, r.Offset)
	}
	if _, ok := errors.AsType[*replay.DifferError](err); !ok || res.Published {
		t.Fatalf("%s; publish of a replay of a compacted topic, main ahead of the branch: err %v, published %v; main now holds the rows of offsets %v: the rows of offsets 1 and 2, which main held and no log holds any more, are gone; want the publish refused (main's range [0, 10) of 10 records holds at least 7 rows below 7, the branch 5)",
			e.mainVerdict("lake.cmpstraddle"), err, res.Published, kept)
	}
}
