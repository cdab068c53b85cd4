package lookup_test

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestAsOfTimeCompactedTopicBehindTable: a table sank offsets 0-5
// of a topic; the log then got offsets 6-9, all stamped before the time
// asked. as-of --time with --brokers must not answer the table's head as
// the table as of that time: records 6-9, stamped before it, are in the
// log and not in the table. On a delete topic it says so (a
// *mapping.NotCoveredError: the broker's cut 10 is past the ledger's next
// 6). The same on a compacted topic (from a review): timeCut lowered the
// broker's cut to the table's TimeCut, whose value where no row is at or
// after the time is the ledger's next offset (6), and answered cut 6,
// source "table", as if the table were complete as of it.
func TestAsOfTimeCompactedTopicBehindTable(t *testing.T) {
	for _, policy := range []string{"delete", "compact"} {
		t.Run(policy, func(t *testing.T) {
			e := floetest.New(t)
			const topic = "lag"
			p := policy
			e.Topic(topic, 1, map[string]*string{"cleanup.policy": &p})
			base := time.Now().Add(-time.Hour).Truncate(time.Second)
			produce := func(from, to int) {
				for i := from; i < to; i++ {
					k := []byte{byte('a' + i)} // distinct keys: compaction removes nothing
					e.Produce([]*kgo.Record{{Topic: topic, Key: k, Value: k, Timestamp: base.Add(time.Duration(i) * time.Second)}})
				}
			}
			produce(0, 6)
			tbl := e.Table("lake.lag")
			if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
				t.Fatal(err)
			}
			produce(6, 10)
			at := base.Add(30 * time.Second) // after every record
			r, err := lookup.AsOf(t.Context(), tbl, e.Broker(), lookup.AsOfQuery{Time: &at})
			if nc, ok := errors.AsType[*mapping.NotCoveredError](err); !ok {
				t.Errorf("as of +30s with the brokers, the table holding 0-5 of 0-9: positions %+v, err %v; want a NotCoveredError (the log has records 6-9 stamped before the time)", r.Positions, err)
			} else if nc.Offset != 10 {
				t.Errorf("not covered at %d, want 10", nc.Offset)
			}
		})
	}
}

// TestWhereKeyAfterCompactionDroppedEveryRow: an upsert table took
// keys a and b, then deletes of both; a compaction applied the deletes
// and dropped them, leaving no row and so no file of its own; a later sink
// added key c. Expected (docs/upsert.md, "unknown": no row and no live
// delete holds the key, but a compaction applied and dropped the deletes,
// and the log was not searched): floe where --key a without --brokers
// answers unknown, as TestWhereKeyAfterCompaction does when the
// compaction left rows. It answered never_seen, for a key that was
// deleted, looking for a live data file a compaction wrote (from a
// review).
func TestWhereKeyAfterCompactionDroppedEveryRow(t *testing.T) {
	e := floetest.New(t)
	e.Topic("u", 1, nil)
	tbl, dlq := e.UpsertTable("lake.u")
	sinkKeyed(t, e, tbl, dlq, 2, "a=a1", "b=b1", "a", "b")
	res, err := tbl.Compact(t.Context(), snapshot.CompactOptions{TargetFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compaction: %+v", res)
	if err := tbl.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	sinkKeyed(t, e, tbl, dlq, 2, "c=c1")
	r, err := lookup.WhereKey(t.Context(), tbl, nil, "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != lookup.KeyStatusUnknown {
		t.Errorf("key a (deleted; the compaction dropped its delete): %s; want %s (%s)", r.Status, lookup.KeyStatusUnknown, r.Explanation)
	}
}
