package lookup_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// sunkThenGone sinks 20 records of a new topic into table, then deletes
// the topic and, with recreate, creates it again with 10 new records.
func sunkThenGone(t *testing.T, e *floetest.Env, topic, table string, recreate bool) *snapshot.Table {
	t.Helper()
	e.Topic(topic, 1, nil)
	e.Produce(floetest.Records(topic, 0, 20, "old"))
	tbl := e.Table(table)
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Broker().Admin().DeleteTopics(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if recreate {
		e.Topic(topic, 1, nil)
		e.Produce(floetest.Records(topic, 0, 10, "new"))
	}
	return tbl
}

// TestLookupsRefuseRecreatedTopic (from a review): after the table's
// topic was deleted and recreated, floe where --brokers explained the
// table's offsets with the new topic's records (a transaction marker
// became a record "the table lost"), floe status --brokers showed no lag
// and nothing lost, and floe as-of --time --brokers cut at the new log's
// offsets. The ledger records the topic's ID: each now refuses the
// brokers' side with a *snapshot.TopicIDError, whose message says the
// table alone answers without --brokers.
func TestLookupsRefuseRecreatedTopic(t *testing.T) {
	e := floetest.New(t)
	const topic = "reborn"
	tbl := sunkThenGone(t, e, topic, "lake.reborn", true)
	at := time.UnixMilli(1_700_000_000_000).Add(10 * time.Second)
	_, whereErr := lookup.Where(t.Context(), tbl, e.Broker(), mapping.TopicPartition{Topic: topic}, 3)
	st, statusErr := lookup.Status(t.Context(), tbl, e.Broker(), nil)
	_, asOfErr := lookup.AsOf(t.Context(), tbl, e.Broker(), lookup.AsOfQuery{Time: &at})
	// status shows the table's side of a topic of its ledger that was
	// recreated, naming it, beside the other topics' broker side (it
	// failed whole: found by review); one asked for with --topic is
	// refused.
	if statusErr != nil || !slices.Equal(st.RecreatedTopics, []string{topic}) || len(st.Partitions) != 1 || st.Partitions[0].Lag != nil {
		t.Errorf("status --brokers on a recreated topic: %+v, %v; want the table's side, the topic named", st, statusErr)
	}
	_, statusErr = lookup.Status(t.Context(), tbl, e.Broker(), []string{topic})
	for name, err := range map[string]error{"where": whereErr, "status --topic": statusErr, "as-of --time": asOfErr} {
		if _, ok := errors.AsType[*snapshot.TopicIDError](err); !ok {
			t.Errorf("%s --brokers on a recreated topic: %v; want a TopicIDError", name, err)
		}
	}
	// Without the brokers the table answers.
	r, err := lookup.AsOf(t.Context(), tbl, nil, lookup.AsOfQuery{Time: &at})
	if err != nil || len(r.Positions) != 1 || r.Positions[0].Offset != 10 {
		t.Errorf("as-of --time without brokers: %+v, %v; want the cut at offset 10", r.Positions, err)
	}
}

// TestAsOfTimeDeletedTopic (from a review): with the table's topic
// deleted, floe as-of --time --brokers failed on the unknown topic; it
// answers from the table's own timestamps, as where does.
func TestAsOfTimeDeletedTopic(t *testing.T) {
	e := floetest.New(t)
	tbl := sunkThenGone(t, e, "gone", "lake.gone", false)
	at := time.UnixMilli(1_700_000_000_000).Add(10 * time.Second)
	r, err := lookup.AsOf(t.Context(), tbl, e.Broker(), lookup.AsOfQuery{Time: &at})
	if err != nil || len(r.Positions) != 1 || r.Positions[0].Offset != 10 {
		t.Fatalf("as of +10s --brokers after the topic was deleted: %+v, %v; want the cut at offset 10 from the table", r.Positions, err)
	}
}
