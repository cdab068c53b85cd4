package replay_test

import (
	"errors"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/replay"
)

// TestPublishMovingMainBackOverCompactedRecords (from a review): main, an append
// table of a compacted topic, holds offsets [0, 10) as rows (two commits,
// [0, 7) and [7, 10)). Compaction then removes offsets of key dup below 9 (its
// last record is at 9). A replay onto a branch ending at 7 (--until,
// the documented "--until ended the replay earlier" case) holds the same 7
// rows as main below 7, and publish moves main back to 7, saying the next
// sink session reads [7, 10) again "while retention still holds them": but
// the log no longer holds the records compaction removed (kfake removes
// offset 7), so the rows main held of them are gone for good, and the
// audit of main at every level says complete (the offset is "compacted"). mainRowsLost takes every offset from the
// branch's next offset up to main's as read again by a sink, whatever the
// log still holds; only retention's log start is considered.
func TestPublishMovingMainBackOverCompactedRecords(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpgoback"
	produce := e.compactedTopic(topic)
	main := e.Table("lake.cmpgoback")
	produce(0, "a", "b", "c", "d", "e", "f", "g")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	produce(7, "dup", "dup", "dup")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(rows(t, e.openExisting("lake.cmpgoback", ""))); n != 10 {
		t.Fatalf("main holds %d rows before compaction, want 10", n)
	}
	e.Stack.Cluster.Compact()
	until, err := replay.ParseBound("0=7", topic, false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.replay("lake.cmpgoback", replay.Options{Topic: topic, Until: until, Branch: "rebuild", Publish: true})
	published := res.Published
	// The next sink session of main reads again from the branch's end.
	if _, serr := e.sink(e.openExisting("lake.cmpgoback", ""), connector.Config{Topic: topic, StopAtEnd: true}); serr != nil {
		t.Fatal(serr)
	}
	var kept []int64
	for _, r := range rows(t, e.openExisting("lake.cmpgoback", "")) {
		kept = append(kept, r.Offset)
	}
	have := map[int64]bool{}
	for _, o := range kept {
		have[o] = true
	}
	var gone []int64
	for o := int64(0); o < 10; o++ {
		if !have[o] {
			gone = append(gone, o)
		}
	}
	if _, ok := errors.AsType[*replay.DifferError](err); !ok || published {
		t.Fatalf("%s; publish moving main back over records compaction removed since main read them: err %v, published %v; after the next sink session main holds the rows of offsets %v, not the 10 it held: the rows of offsets %v, which main held, are gone for good (compaction removed their records); want the publish refused (main holds rows above the branch's end that no sink can read again)",
			e.mainVerdict("lake.cmpgoback"), err, published, kept, gone)
	}
}
