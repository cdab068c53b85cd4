package connector_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
)

// TestWhereKeyConnectWrapped (from a new user's CDC evaluation): floe where
// --key given a Debezium key as it sits in Kafka, in the JSON converter's
// schema wrapper (schemas.enable=true), was refused: "payload, schema is
// not a key column", though the sink takes that form. It is answered as
// the key the sink decodes it into, whatever the wrapper's integer type;
// a key no record had is never seen.
func TestWhereKeyConnectWrapped(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_connect"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable("lake.wk_connect", floetest.CDCPlainJSON)
	e.Produce([]*kgo.Record{
		dbzEvent(topic, "c", 1, "one@x", 0),   // 0
		dbzEvent(topic, "c", 3, "three@x", 1), // 1
		dbzEvent(topic, "u", 3, "three@y", 2), // 2: customer 3's row
	})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	wrapped := func(typ string, id int) string {
		return fmt.Sprintf(`{"schema":{"type":"struct","fields":[{"type":%q,"optional":false,"field":"id"}],"optional":false,"name":"dbserver1.inventory.customers.Key"},"payload":{"id":%d}}`, typ, id)
	}
	for _, typ := range []string{"int32", "int64"} {
		key := wrapped(typ, 3)
		r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), key)
		if err != nil {
			t.Fatalf("where --key %s: %v", key, err)
		}
		if r.Status != lookup.KeyStatusRow || deref64(r.Offset) != int64(2) || r.Key != key || r.Columns["id"] != "3" {
			t.Errorf("where --key %s: %+v; want customer 3's row at offset 2", key, r)
		}
	}
	if r := searchWhere(t, e, tbl, wrapped("int32", 9)); r.Status != lookup.KeyStatusNeverSeen {
		t.Errorf("a wrapped key no record had: %+v; want never_seen", r)
	}
}
