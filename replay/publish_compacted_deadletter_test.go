package replay_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
)

// TestPublishDropsDeadLetterCompactedAway (from a review): main, a JSON table of
// a compacted topic, holds offsets 0 and 2-5 as rows and offset 1 (a
// value that is not JSON) as a dead letter in its dead-letter table: the
// only copy of that record once compaction removes it (its key was written
// again at 3; two more records follow, without which kfake's compaction
// left offset 1). A replay onto a branch reads the 5 records the log still
// holds and publishes: the publish removes main's dead letter (its commit
// is no longer in main's ledger), and nothing holds that record any more.
// mainRowsFewer compares rows only (Range.Records), never dead letters:
// main 5, branch 5, equal; every audit of main then says complete.
func TestPublishDropsDeadLetterCompactedAway(t *testing.T) {
	e := newEnv(t)
	const topic = "cmpdead"
	e.compactedTopic(topic)
	tbl, dlq := e.TypedTable("lake.cmpdead", mapping.Layout{Value: mapping.ValueJSON})
	for _, r := range [][2]string{{"a", `{"id":1}`}, {"b", `oops`}, {"c", `{"id":3}`}, {"b", `{"id":4}`}, {"d", `{"id":5}`}, {"e", `{"id":6}`}} {
		e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(r[0]), Value: []byte(r[1])}})
	}
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	_, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, map[mapping.TopicPartition]int64{{Topic: topic}: 6})
	if len(dead) != 1 {
		t.Fatalf("main's dead letters: %d, want 1", len(dead))
	}
	e.Stack.Cluster.Compact()
	res, err := e.replay("lake.cmpdead", replay.Options{Topic: topic, Branch: "rebuild", Publish: true})
	_, dlq = e.TypedTable("lake.cmpdead", mapping.Layout{Value: mapping.ValueJSON})
	left := len(floetest.Rows(t, dlq))
	if _, ok := errors.AsType[*replay.DifferError](err); !ok || res.Published {
		t.Fatalf("%s; publish of a replay of a compacted topic over main's dead letter: err %v, published %v; main's dead-letter table now holds %d dead letters (it held the only copy of offset 1's record); want the publish refused (main accounts for offset 1 as a dead letter, the branch for nothing)",
			e.mainVerdict("lake.cmpdead"), err, res.Published, left)
	}
}
