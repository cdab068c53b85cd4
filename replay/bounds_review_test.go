package replay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/replay"
)

// TestFromTimeBeforeEpoch (from a review): every record's timestamp is after
// 1969-12-31T23:59:59.999Z, so a replay from that time must start at the
// log start. Its UnixMilli is -1, which ListOffsets reads as "latest".
func TestFromTimeBeforeEpoch(t *testing.T) {
	e := newEnv(t)
	const topic = "epoch"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	for i, spec := range []string{"1969-12-31T23:59:59.999Z", "1969-12-31T23:59:59.998Z", "1960-01-01T00:00:00Z"} {
		name := fmt.Sprintf("lake.epoch_%d", i)
		res, err := e.replay(name, replay.Options{Topic: topic, From: bound(t, spec, topic, true)})
		if err != nil {
			t.Errorf("from %s: %v", spec, err)
			continue
		}
		if res.Plan.Start[0] != 0 {
			t.Errorf("from %s: plan starts partition 0 at %d, want 0 (every record is after the time)", spec, res.Plan.Start[0])
		}
	}
}

// TestFromTimeSubMillisecond (from a review): a record at ms X is before X+0.5ms, so a
// replay from X+0.5ms must not include it.
func TestFromTimeSubMillisecond(t *testing.T) {
	e := newEnv(t)
	const topic = "subms"
	e.Topic(topic, 1, nil)
	base := time.UnixMilli(1_700_000_000_000)
	for i := range 3 {
		e.Produce([]*kgo.Record{{Topic: topic, Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}})
	}
	from := base.Add(500 * time.Microsecond) // between offsets 0 and 1
	res, err := e.replay("lake.subms", replay.Options{Topic: topic, From: bound(t, from.Format(time.RFC3339Nano), topic, true)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.Start[0] != 1 {
		t.Fatalf("from %s: plan starts at offset %d, want 1 (offset 0's timestamp %s is before the time)", from.Format(time.RFC3339Nano), res.Plan.Start[0], base.Format(time.RFC3339Nano))
	}
}

// TestUntilTimeBeforeEpoch (from a review): no record is before
// 1969-12-31T23:59:59.999Z, so a replay until then must hold nothing; its
// UnixMilli is -1 ("latest"), and the replay takes the whole log.
func TestUntilTimeBeforeEpoch(t *testing.T) {
	e := newEnv(t)
	const topic = "epochuntil"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 10, "a"))
	res, err := e.replay("lake.epoch_until", replay.Options{Topic: topic, Until: bound(t, "1969-12-31T23:59:59.999Z", topic, false)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Plan.End[0] != 0 {
		t.Fatalf("until 1969-12-31T23:59:59.999Z: plan ends partition 0 at %d, want 0 (no record is before the time)", res.Plan.End[0])
	}
}

// TestFromSnapshotAfterTopicRecreated (from a review): --from snapshot:ID names where
// a floe table had got to in topic reborn; the topic was deleted and
// recreated since, so those offsets name records of another log. The
// replay must refuse (as a resume onto a recreated topic does), not start
// the new topic at the old topic's offsets.
func TestFromSnapshotAfterTopicRecreated(t *testing.T) {
	e := newEnv(t)
	const topic = "rebornsnap"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 20, "old"))
	src := e.Table("lake.src")
	if _, err := e.sink(src, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	id := src.Head().SnapshotID
	if _, err := e.Dial().Admin().DeleteTopics(e.Ctx, topic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "new"))
	res, err := e.replay("lake.fromsnap", replay.Options{Topic: topic, From: bound(t, fmt.Sprintf("snapshot:%d", id), topic, true)})
	if err == nil {
		t.Fatalf("replay from snapshot %d of the deleted topic started the recreated topic at offset %d (complete %v): the snapshot's positions name another log's records", id, res.Plan.Start[0], res.Complete)
	}
	t.Logf("refused: %v", err)
}

// TestFromTimeAheadOfClock (from a review): Kafka keeps a producer's CreateTime as
// given, so records can carry timestamps ahead of the wall clock (a skewed
// producer clock). A replay from a time between now and such a record's
// timestamp has records at or after it: it is replayed, where it was
// refused as "no record can be at or after it".
func TestFromTimeAheadOfClock(t *testing.T) {
	e := newEnv(t)
	const topic = "skewed"
	e.Topic(topic, 1, nil)
	ahead := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	e.Produce([]*kgo.Record{{Topic: topic, Value: []byte("old"), Timestamp: time.Now().Add(-time.Hour)},
		{Topic: topic, Value: []byte("skewed"), Timestamp: ahead}})
	from := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	res, err := e.replay("lake.skewed", replay.Options{Topic: topic, From: bound(t, from, topic, true)})
	if err != nil {
		t.Fatalf("replay from %s (the log holds a record stamped %s at offset 1): %v", from, ahead.UTC().Format(time.RFC3339), err)
	}
	if res.Plan.Start[0] != 1 {
		t.Fatalf("plan starts at %d, want 1", res.Plan.Start[0])
	}
}
