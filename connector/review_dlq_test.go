package connector_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestGroupAdoptionAddsPendingDeadLetters (review of issue 19: "every
// reconciliation (sink start, group adoption, ...) converges"): member B
// runs; member A joins the group, commits a flush of its partition with a
// dead letter, and dies before adding the dead letter to the dead-letter
// table (its appends to it fail). B adopts A's partition and goes on
// committing it. B, which took over the partition, must add A's pending
// dead letter: no other session may ever start.
func TestGroupAdoptionAddsPendingDeadLetters(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "adopt", "lake.adopt", "floe-adopt"
	e.Topic(topic, 2, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tblB, dlqB := e.TypedTable(table, layout)
	for p := range int32(2) {
		e.Produce(jsonRecords(topic, p, `{"id":1}`))
	}
	cfgB := groupConfig(topic, group)
	cfgB.DeadLetters = dlqB
	b := e.startMemberOn(tblB, cfgB)
	waitFor(t, 30*time.Second, "member B assigned both partitions", func() bool { return b.assigned.Load() == 2 })

	tblA, _ := e.TypedTable(table, layout)
	badA, _ := e.faultyDeadLetters(tblA)
	cfgA := groupConfig(topic, group)
	cfgA.DeadLetters = badA
	a := e.startMemberOn(tblA, cfgA)
	waitFor(t, 30*time.Second, "member A assigned a partition", func() bool { return a.assigned.Load() > 0 })
	time.Sleep(time.Second) // B has given it up
	for p := range int32(2) {
		e.Produce(jsonRecords(topic, p, `oops`, `{"id":2}`))
	}
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("member A did not stop on its pending dead letters")
	}
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](a.err); !ok {
		t.Fatalf("member A stopped with %v, want a DeadLettersPendingError", a.err)
	}
	waitFor(t, 30*time.Second, "member B took A's partition over", func() bool { return b.assigned.Load() >= 3 })
	for p := range int32(2) {
		e.Produce(jsonRecords(topic, p, `{"id":3}`))
	}
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 30*time.Second)
	time.Sleep(2 * time.Second)
	b.halt(t)
	tbl, dlq := e.TypedTable(table, layout)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	_, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if len(dead) != 2 {
		t.Errorf("%d dead letters in %s after B adopted A's partition and committed it, want 2 (A's is pending)", len(dead), dlq.Name())
	}
}

// TestRevocationWithPendingDeadLettersCommitted (review, 2026-12-04): a
// revocation whose flush commits its rows but cannot add their dead
// letters to the dead-letter table is committed (the rows are in the
// ledger, a successor adds the dead letters): Rebalance.Committed says
// so, where it said the records were dropped.
func TestRevocationWithPendingDeadLettersCommitted(t *testing.T) {
	e := newEnv(t)
	const topic, table, group = "revokedlq", "lake.revokedlq", "floe-revokedlq"
	e.Topic(topic, 2, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tblA, _ := e.TypedTable(table, layout)
	badA, _ := e.faultyDeadLetters(tblA)
	revoked := make(chan connector.Rebalance, 4)
	cfgA := groupConfig(topic, group)
	cfgA.DeadLetters = badA
	cfgA.FlushInterval = time.Hour // only the revocation flushes
	cfgA.OnRebalance = func(r connector.Rebalance) {
		if len(r.Revoked) > 0 {
			revoked <- r
		}
	}
	a := e.startMemberOn(tblA, cfgA)
	waitFor(t, 30*time.Second, "member A assigned both partitions", func() bool { return a.assigned.Load() == 2 })
	for p := range int32(2) {
		e.Produce(jsonRecords(topic, p, `{"id":1}`, `oops`, `{"id":2}`))
	}
	time.Sleep(2 * time.Second) // A has consumed them
	tblB, dlqB := e.TypedTable(table, layout)
	cfgB := groupConfig(topic, group)
	cfgB.DeadLetters = dlqB
	b := e.startMemberOn(tblB, cfgB)
	defer b.halt(t)
	var r connector.Rebalance
	select {
	case r = <-revoked:
	case <-time.After(40 * time.Second):
		t.Fatal("no revocation from member A")
	}
	select {
	case <-a.done:
	case <-time.After(30 * time.Second):
		t.Fatal("member A did not stop on its pending dead letters")
	}
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](a.err); !ok {
		t.Fatalf("member A stopped with %v, want a DeadLettersPendingError", a.err)
	}
	reader := e.Table(table)
	if err := reader.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := reader.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range r.Revoked {
		if next := l.Next()[mapping.TopicPartition{Topic: topic, Partition: p}]; next != 3 {
			t.Errorf("the ledger holds %s/%d up to %d, want 3 (A's revocation flush)", topic, p, next)
		}
	}
	if !r.Committed {
		t.Errorf("revocation of %v reported as not committed, although its flush's rows are in the ledger (only its dead letters are pending)", r.Revoked)
	}
}

// TestWherePendingDeadLetterNotMissing (from a review): a flush whose
// rows committed but whose dead letter could not be added yet (a
// DeadLettersPendingError: the next sink run adds it). The dead letter's
// offset is accounted for by the ledger as a dead letter (the range counts
// it): where --brokers says the dead-letter table does not hold it (its
// dead letters are pending, or were removed), where it said "missing: the
// table lost it".
func TestWherePendingDeadLetterNotMissing(t *testing.T) {
	e := newEnv(t)
	const topic, table = "pendwhere", "lake.pendwhere"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TypedTable(table, mapping.Layout{Value: mapping.ValueJSON})
	// A first dead letter (offset 0) goes in, so the dead-letter table has a snapshot.
	e.Produce(jsonRecords(topic, 0, `bad`))
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	bad, _ := e.faultyDeadLetters(tbl)
	e.Produce(jsonRecords(topic, 0, `{"id":1}`, `oops`, `{"id":2}`)) // offsets 1-3
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: bad})
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](err); !ok {
		t.Fatalf("sink: %v, want a DeadLettersPendingError", err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	r, err := lookup.Where(e.Ctx, tbl, e.Broker(), mapping.TopicPartition{Topic: topic, Partition: 0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s/%s: %s", r.Status, r.Kind, r.Explanation)
	if r.Kind != lookup.KindDeadLetterNotFound {
		t.Errorf("where offset 2 (a dead letter whose addition is pending): kind %s; want %s: %s", r.Kind, lookup.KindDeadLetterNotFound, r.Explanation)
	}
	// Without the log, the offset may be a marker, an aborted record or
	// (in an upsert table) a superseded value as well: the kind is not
	// claimed, the pending dead letter is named among the possibilities.
	r, err = lookup.Where(e.Ctx, tbl, nil, mapping.TopicPartition{Topic: topic, Partition: 0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != "" || !strings.Contains(r.Explanation, "pending") || !strings.Contains(r.Explanation, "transaction marker") {
		t.Errorf("where offset 2 without --brokers: kind %q; want none, naming a marker and a pending dead letter: %s", r.Kind, r.Explanation)
	}
}

// TestWherePendingDeadLetterUpsert: in an upsert table, a record without a
// row in a range whose dead letter is pending may be a superseded value or
// that dead letter: with --brokers the answer was "superseded" (here an
// undecodable value whose key occurs once), without the pending dead
// letter (from a review). Without the log the kind is unknown and the
// explanation names both; with it, the key has no row and no delete
// since, so nothing superseded it: it is the dead letter not found.
func TestWherePendingDeadLetterUpsert(t *testing.T) {
	e := newEnv(t)
	const topic, table = "pendupsert", "lake.pendupsert"
	e.Topic(topic, 1, nil)
	key := mapping.UpsertKey{Source: mapping.KeyFromKafkaKey, Columns: []string{mapping.ColKey}}
	tbl, dlq := e.TableWithDeadLetters(table, snapshot.OpenOptions{Create: true, Layout: mapping.Layout{Key: mapping.KeyString, Value: mapping.ValueJSON},
		Mode: mapping.ModeUpsert, Key: &key})
	e.Produce(jsonRecords(topic, 0, `bad`))
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	bad, _ := e.faultyDeadLetters(tbl)
	e.Produce(jsonRecords(topic, 0, `{"id":1}`, `oops`, `{"id":2}`)) // offsets 1-3, keys k0 k1 k2
	_, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: bad})
	if _, ok := errors.AsType[*snapshot.DeadLettersPendingError](err); !ok {
		t.Fatalf("sink: %v, want a DeadLettersPendingError", err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	tp := mapping.TopicPartition{Topic: topic, Partition: 0}
	r, err := lookup.Where(e.Ctx, tbl, nil, tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("without --brokers: %s/%s: %s", r.Status, r.Kind, r.Explanation)
	if r.Kind != "" || !strings.Contains(r.Explanation, "superseded") || !strings.Contains(r.Explanation, "pending") {
		t.Errorf("without --brokers: kind %q, want none, naming a superseded value and a pending dead letter: %s", r.Kind, r.Explanation)
	}
	r, err = lookup.Where(e.Ctx, tbl, e.Broker(), tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with --brokers: %s/%s: %s", r.Status, r.Kind, r.Explanation)
	if r.Kind != lookup.KindDeadLetterNotFound || !strings.Contains(r.Explanation, "pending") {
		t.Errorf("where --brokers offset 2 of an upsert table (an undecodable value whose dead letter is pending): kind %q, want %s, naming the pending dead letter: %s", r.Kind, lookup.KindDeadLetterNotFound, r.Explanation)
	}
}

// TestEmptyJSONReasons: an empty value is a dead letter saying a tombstone
// is a null value (kcat without -Z sends an empty one), where it said
// "not valid JSON: EOF" (from a new user); an empty key says it is empty,
// without a word of tombstones (from a review).
func TestEmptyJSONReasons(t *testing.T) {
	e := newEnv(t)
	const topic = "emptyjson"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.TypedTable("lake.emptyjson", mapping.Layout{Value: mapping.ValueJSON, Key: mapping.KeyJSON})
	e.Produce([]*kgo.Record{
		{Topic: topic, Partition: 0, Key: []byte{}, Value: []byte(`{"id":1}`)},
		{Topic: topic, Partition: 0, Key: []byte(`{"k":1}`), Value: []byte{}},
	})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	for offset, want := range map[int64]struct{ has, hasNot string }{
		0: {"not valid JSON: empty (0 bytes)", "tombstone"},
		1: {"a tombstone, which deletes its key in an upsert table, is a null value", ""},
	} {
		r, err := lookup.Where(e.Ctx, tbl, nil, mapping.TopicPartition{Topic: topic, Partition: 0}, offset)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != lookup.KindDeadLetter || !strings.Contains(r.Reason, want.has) || (want.hasNot != "" && strings.Contains(r.Reason, want.hasNot)) {
			t.Errorf("offset %d: %s/%s, reason %q; want a dead letter saying %q", offset, r.Status, r.Kind, r.Reason, want.has)
		}
	}
}
