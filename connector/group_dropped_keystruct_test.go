package connector_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/floe-dev/floe/internal/metrics"

	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestKeyStructWiderThanKeyColumns (from a review): a table keyed by its key's
// fields (key:id) whose kafka_key struct has a field more than its key
// columns (another engine's ALTER TABLE ADD COLUMN kafka_key.note, or a
// table an earlier floe widened, the bug 43c6b88 names). Every flush's
// schema then carries the wider struct, and the new keyNamedOtherwise
// check in Table.commit (43c6b88) answers ErrSchemaMoved at every commit:
// the sink re-reads 20 times and stops, committing nothing, where before
// it committed.
func TestKeyStructWiderThanKeyColumns(t *testing.T) {
	e := newEnv(t)
	topic, name := "people-wide", "lake.people_wide"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TableWithDeadLetters(name, keyFieldsOptions(t, mapping.KeyJSON))
	e.Produce([]*kgo.Record{keyedRec(topic, []byte(`{"id":1}`), `{"name":"one"}`, 0)})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	// Another engine widens kafka_key.
	fresh := e.OpenTable(name, snapshot.OpenOptions{})
	txn := fresh.Iceberg().NewTransaction()
	if err := txn.UpdateSchema(true, false).AddColumn([]string{mapping.ColKey, "note"}, iceberg.PrimitiveTypes.String, "", false, nil).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(e.Ctx); err != nil {
		t.Fatal(err)
	}
	again := e.OpenTable(name, snapshot.OpenOptions{})
	t.Logf("key %v, schema %v", again.UpsertKey(), again.Iceberg().Schema())
	e.Produce([]*kgo.Record{keyedRec(topic, []byte(`{"id":2}`), `{"name":"two"}`, 1)})
	_, err := e.sink(again, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: e.OpenTable(dlq.Name(), snapshot.OpenOptions{})})
	if err != nil {
		t.Fatalf("the sink stopped without committing offset 1: %v", err)
	}
	lg, err := e.OpenTable(name, snapshot.OpenOptions{}).Ledger()
	if err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	if lg.Next()[tp] != 2 {
		t.Fatalf("ledger next %d, want 2", lg.Next()[tp])
	}
	for _, r := range rows(t, e.OpenTable(name, snapshot.OpenOptions{})) {
		t.Log(fmt.Sprint(r.Columns))
	}
}

// TestIdleMemberDroppedRunsAgain (from a review): two members of a group on a
// one-partition topic; the coordinator drops both (UNKNOWN_MEMBER_ID on
// their heartbeats, as after a pause past the session timeout). They
// rejoin; one is assigned the partition, the other nothing (a group with
// more members than partitions). e49ed65 makes a dropped member
// "retrying" until OnSession, which connector's assigned() calls only for
// a non-empty assignment (it returns before OnSession when ps is empty,
// though franz-go calls onAssigned for empty ones too): the idle member,
// back in the group, says retrying with the drop's error for good.
func TestIdleMemberDroppedRunsAgain(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "idle-drop", "lake.idle_drop", "floe-idle-drop"
	e.Topic(topic, 1, nil)
	e.Table(table)
	reg := metrics.New()
	var members []*member
	var lost atomic.Int64
	for i := range 2 {
		cfg := groupConfig(topic, group)
		cfg.OnRebalance = func(r connector.Rebalance) { lost.Add(int64(len(r.Lost))) }
		p := reg.Pipeline(topic, fmt.Sprintf("%s#%d", table, i), []int32{0})
		p.Hook(&cfg)
		members = append(members, e.startMember(table, cfg))
	}
	e.Produce(records(topic, 0, 5, "before"))
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
	// Drop both members: answer heartbeats of each with UNKNOWN_MEMBER_ID once.
	var mu sync.Mutex
	kicked := map[string]bool{}
	e.Stack.Cluster.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		hb := req.(*kmsg.HeartbeatRequest)
		mu.Lock()
		defer mu.Unlock()
		if kicked[hb.MemberID] || len(kicked) >= 2 {
			if len(kicked) < 2 {
				e.Stack.Cluster.KeepControl()
			}
			return nil, nil, false
		}
		kicked[hb.MemberID] = true
		if len(kicked) < 2 {
			e.Stack.Cluster.KeepControl()
		}
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	waitFor(t, 60*time.Second, "both members dropped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(kicked) == 2
	})
	// Let the group settle (both rejoin, one gets the partition).
	time.Sleep(15 * time.Second)
	e.Produce(records(topic, 0, 5, "after"))
	waitLedger(t, e, table, e.endOffsets(topic), 30*time.Second)
	time.Sleep(2 * time.Second)
	_, doc := reg.Health()
	b, _ := json.Marshal(doc)
	t.Logf("health: %s", b)
	for _, m := range members {
		m.halt(t)
	}
	if strings.Contains(string(b), `"state":"retrying"`) {
		t.Errorf("a member back in the group (idle: no partition for it) still says retrying with the drop's error: %s", b)
	}
}
