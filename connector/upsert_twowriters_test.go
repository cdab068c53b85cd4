package connector_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestKeyNamedByTwoWriters: a table keyed by its key's fields, not
// named yet, written by two sinks (as two members of a group: each owns a
// partition). Sink B reads partition 1, whose first key is
// {"id":1,"tenant":"x"}, and its commit is in flight when sink A, on
// partition 0 whose first key is {"id":2}, commits and names the key
// columns id. B's record must end as the rules say for a key with other
// fields once the key is named (a dead letter), or B must re-read; the
// table must stay one row per key with identifier fields id, and the
// audit must agree with it. B's commit wrote its rows again under A's key
// instead: B's record became a row (and with A's id=1, replaced A's). From
// the second review of the upsert path.
func TestKeyNamedByTwoWriters(t *testing.T) {
	for _, aID := range []int{2, 1} {
		t.Run(fmt.Sprint("A's id=", aID), func(t *testing.T) { keyNamedByTwoWriters(t, aID, false, `{"id":1,"tenant":"x"}`) })
	}
}

// TestKeyFewerFieldsTwoWriters: as TestKeyNamedByTwoWriters,
// A's first key {"id":2,"tenant":"t"} names the key id,tenant while B's
// commit of {"id":1} is in flight: B's row has no tenant, a key column.
// B must not stop for good; its record is a dead letter by the rules (B
// stopped: "batch has no column tenant").
func TestKeyFewerFieldsTwoWriters(t *testing.T) {
	keyNamedByTwoWriters(t, -2, false, `{"id":1}`)
}

// TestKeyTypedByTwoWriters: as TestKeyNamedByTwoWriters, B's
// first key of the same field name, another type ({"id":"s1"}, A's
// {"id":2}): B must not stop for good, nor write a row.
func TestKeyTypedByTwoWriters(t *testing.T) {
	keyNamedByTwoWriters(t, 2, false, `{"id":"s1"}`)
}

// TestKeyNamedByTwoWritersCompacted: TestKeyNamedByTwoWriters (A's
// id=1, whose row B's {id:1,tenant:x,name:b1} replaced) on a compacted
// topic. Later records of the same Kafka keys arrive and are dead letters
// (an undecodable value in partition 0, the key with tenant in partition
// 1); compaction then removes the two records of the first commits. The
// audit, lenient on compacted topics, called the table with the wrong row
// b1 complete; the table holds A's row now, before and after compaction.
func TestKeyNamedByTwoWritersCompacted(t *testing.T) {
	keyNamedByTwoWriters(t, 1, true, `{"id":1,"tenant":"x"}`)
}

func keyNamedByTwoWriters(t *testing.T, aID int, compacted bool, bKey string) {
	e := newEnv(t)
	const topic, name = "people-two", "lake.people_two"
	var cfgs map[string]*string
	if compacted {
		compact := "compact"
		cfgs = map[string]*string{"cleanup.policy": &compact}
	}
	e.Topic(topic, 2, cfgs)
	opts := keyFieldsOptions(t, mapping.KeyJSON)
	fc := e.newFaultCatalog(name)
	tblB, err := snapshot.Open(e.Ctx, fc, fc.ident, opts)
	if err != nil {
		t.Fatal(err)
	}
	dlqB, err := snapshot.OpenDeadLetters(e.Ctx, fc, snapshot.DeadLetterName(fc.ident), tblB.Name(), true)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(p int32, k, v string, ts int) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Key: []byte(k), Value: []byte(v), Timestamp: time.Now().Add(time.Duration(ts-60) * time.Second)}
	}
	// Both partitions' starts, committed before anything is held.
	if _, err := e.sink(tblB, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlqB}); err != nil {
		t.Fatal(err)
	}
	tblA, dlqA := e.OpenTable(name, snapshot.OpenOptions{}), e.OpenTable(strings.Join(snapshot.DeadLetterName(fc.ident), "."), snapshot.OpenOptions{})
	e.Produce([]*kgo.Record{rec(1, bKey, `{"name":"b1"}`, 0)})
	aKey := fmt.Sprintf(`{"id":%d}`, aID)
	if aID < 0 {
		aKey = fmt.Sprintf(`{"id":%d,"tenant":"t"}`, -aID)
	}
	e.Produce([]*kgo.Record{rec(0, aKey, `{"name":"a"}`, 1)})

	release := fc.holdCommits()
	defer release()
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	done := make(chan error, 1)
	sB, err := connector.NewSink(e.Dial(), tblB, connector.Config{Topic: topic, Partitions: []int32{1}, FlushRecords: 1, FlushInterval: 100 * time.Millisecond, DeadLetters: dlqB, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, err := sB.Run(ctx); done <- err }()
	select {
	case <-fc.entered: // B's commit of {"id":1,"tenant":"x"} is held
	case <-time.After(30 * time.Second):
		t.Fatal("no commit from B")
	}
	// A commits partition 0 meanwhile, naming the key.
	if _, err := e.sink(tblA, connector.Config{Topic: topic, Partitions: []int32{0}, StopAtEnd: true, DeadLetters: dlqA}); err != nil {
		t.Fatal(err)
	}
	if err := tblA.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("after A: key %v", tblA.UpsertKey())
	release()
	waitFor(t, 30*time.Second, "B's commit or its end", func() bool {
		select {
		case err := <-done:
			done <- err
			return true
		default:
		}
		r := e.OpenTable(name, snapshot.OpenOptions{})
		lg, err := r.Ledger()
		if err != nil {
			return false
		}
		return lg.Next()[mapping.TopicPartition{Topic: topic, Partition: 1}] == 1
	})
	cancel()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(30 * time.Second):
	}
	t.Logf("B ended: %v", runErr)
	if compacted {
		// Later records of the same Kafka keys, dead letters both, then a
		// record of another key in each partition (kfake never compacts a
		// partition's last batch).
		e.Produce([]*kgo.Record{rec(0, fmt.Sprintf(`{"id":%d}`, aID), `not json`, 2)})
		e.Produce([]*kgo.Record{rec(1, `{"id":1,"tenant":"x"}`, `{"name":"b2"}`, 3)})
		e.Produce([]*kgo.Record{rec(0, `{"id":7}`, `{"name":"seven"}`, 4)})
		e.Produce([]*kgo.Record{rec(1, `{"id":8}`, `{"name":"eight"}`, 5)})
		st, err := e.sink(e.OpenTable(name, snapshot.OpenOptions{}), connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlqA})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("follow-up sink: %+v", st)
		if !auditSays(t, e, e.OpenTable(name, snapshot.OpenOptions{})) {
			t.Fatal("before compaction, the audit reports findings")
		}
		e.Stack.Cluster.Compact()
	}
	reader := e.OpenTable(name, snapshot.OpenOptions{})
	var got []string
	for _, r := range rows(t, reader) {
		got = append(got, fmt.Sprintf("id=%s tenant=%s name=%s", r.Columns["id"], r.Columns["tenant"], r.Columns["name"]))
	}
	dead := len(rows(t, e.OpenTable(strings.Join(snapshot.DeadLetterName(fc.ident), "."), snapshot.OpenOptions{})))
	t.Logf("key %v, identifier fields %v, rows %v, dead letters %d", reader.UpsertKey(), reader.Iceberg().Schema().IdentifierFieldIDs, got, dead)
	complete := auditSays(t, e, reader)
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		t.Fatalf("B stopped: %v", runErr)
	}
	if !complete {
		t.Fatalf("audit reports findings: rows %v, dead %d", got, dead)
	}
	if compacted && aID == 1 && slices.ContainsFunc(got, func(s string) bool { return strings.HasSuffix(s, "name=b1") }) {
		t.Fatalf("the audit calls the table complete, but it holds {id:1,tenant:x} (b1), a dead letter by the rules, where A's committed record {id:1} (a) should be: rows %v", got)
	}
}
