package connector_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
)

// TestWhereOffsetNamesDebeziumKey (from a new user's CDC evaluation):
// floe where --partition --offset --brokers on a Debezium table, for a
// record without a row, answered "superseded by a later value for its
// key, deleted by a tombstone or without a key", naming neither which nor
// the key. It names the key the record decodes into, says whether the
// record deletes it (a delete event or a tombstone: which), and gives the
// floe where --key that says where the key stands.
func TestWhereOffsetNamesDebeziumKey(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wo_key"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.wo_key", floetest.CDCPlainJSON)
	e.Produce([]*kgo.Record{
		dbzEvent(topic, "c", 3, "three@x", 0), // 0: superseded by 1
		dbzEvent(topic, "u", 3, "three@y", 1), // 1: customer 3's row
		dbzEvent(topic, "c", 4, "four@x", 2),  // 2: deleted by 3
		dbzEvent(topic, "d", 4, "four@x", 3),  // 3
		dbzEvent(topic, "-", 4, "", 4),        // 4
	})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	for _, c := range []struct {
		offset int64
		want   string
	}{
		{0, `it is a value of key {"id":3} (read from the broker) that the table folded into its latest row per key: superseded by a later value of the key, or deleted since; floe where --table lake.wo_key --key '{"id":3}' tells which`},
		{2, `it is a value of key {"id":4} (read from the broker)`},
		{3, `it deletes key {"id":4} (read from the broker: a delete event), and makes no row; floe where --table lake.wo_key --key '{"id":4}' says where the key stands`},
		{4, `it deletes key {"id":4} (read from the broker: a tombstone, a record without a value)`},
	} {
		r, err := lookup.Where(e.Ctx, tbl, e.Broker(), tp, c.offset)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("where --offset %d: %s %s: %s", c.offset, r.Status, r.Kind, r.Explanation)
		if r.Status != lookup.StatusNoRow || r.Kind != lookup.KindSuperseded || !strings.Contains(r.Explanation, c.want) {
			t.Errorf("where --offset %d: %s %s: %s\nwant: %s", c.offset, r.Status, r.Kind, r.Explanation, c.want)
		}
	}
}
