package replay_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/replay"
)

// TestPublishRefusesRowsCompactedAway (from a review): main, an append
// table, sank a compacted topic before compaction: it holds all 7
// records. Compaction then removes offsets 1 and 2 (k1 and k2 were written
// again). A replay onto a branch reads the 5 records the log still has;
// --publish made it main, dropping the rows of offsets 1 and 2, which no
// log holds any more, and the audit of main said complete. Publish refuses
// it as it refuses offsets retention deleted, naming the counts; with
// --publish-different it publishes.
func TestPublishRefusesRowsCompactedAway(t *testing.T) {
	e := newEnv(t)
	const topic = "cmppub"
	e.compactedTopic(topic)(0, "u0", "k1", "k2", "k1", "k2", "z", "y")
	main := e.Table("lake.cmppub")
	if _, err := e.sink(main, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if n := len(rows(t, e.openExisting("lake.cmppub", ""))); n != 7 {
		t.Fatalf("main holds %d rows before compaction, want 7", n)
	}
	e.Stack.Cluster.Compact()
	res, err := e.replay("lake.cmppub", replay.Options{Topic: topic, Branch: "rebuild", Publish: true})
	after := len(rows(t, e.openExisting("lake.cmppub", "")))
	if differ, ok := errors.AsType[*replay.DifferError](err); !ok || res.Published || after != 7 ||
		!strings.Contains(err.Error(), "cmppub/0: main holds 2 offsets (1, 2) the branch has no record of (the topic's compaction removed them since main read them)") {
		t.Fatalf("publish of a replay of a compacted topic: %v (%v), published %v, main went from 7 rows to %d (%s); want it refused", err, differ, res.Published, after, e.mainVerdict("lake.cmppub"))
	}
	// --publish-different publishes what the log holds now.
	res, err = e.replay("lake.cmppub", replay.Options{Topic: topic, Branch: "rebuild", Publish: true, PublishDifferent: true})
	if err != nil || !res.Published || len(rows(t, e.openExisting("lake.cmppub", ""))) != 5 {
		t.Fatalf("--publish-different: %v, published %v", err, res.Published)
	}
}
