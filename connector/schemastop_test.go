package connector_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
)

// TestSchemaChangeStopsPoll: a new column every 300 records of each of two
// partitions, produced interleaved, past the spill bytes: the spill lane's
// files are open at every change, so the poll stops at the record that
// needs the column (errSchemaFlush), the loop commits the flush, and the
// next poll reads on from that record, in the fetch in hand. Every record
// must be a row once, with its content (the audit reads the log again),
// and the table must have every column.
func TestSchemaChangeStopsPoll(t *testing.T) {
	e := newEnv(t)
	const topic = "schemastop"
	e.Topic(topic, 2, nil)
	for round := range 10 {
		for p := range int32(2) {
			e.Produce(evolvingRecords(topic, p, 300, 100, fmt.Sprint(round)))
		}
	}
	tbl, dlq := e.TypedTable("lake.schemastop", mapping.Layout{Value: mapping.ValueJSON})
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(), DeadLetters: dlq,
		FlushRecords: 1_000_000, FlushInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	connector.SetSpillBytes(s, 8<<10)
	st, err := s.Run(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Commits < 10 {
		t.Errorf("%d commits, want one at least for each of the 10 schema changes", st.Commits)
	}
	rs, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, e.endOffsets(topic))
	if len(rs) != 6000 || len(dead) != 0 {
		t.Errorf("%d rows and %d dead letters, want 6000 rows", len(rs), len(dead))
	}
	for round := range 10 {
		if _, ok := tbl.Iceberg().Schema().FindFieldByName(fmt.Sprintf("c_%d", round)); !ok {
			t.Errorf("the table has no column c_%d", round)
		}
	}
	auditComplete(t, e, tbl)
}

// TestSchemaStopKeepsRecordsInHand: the poll stops at record 400, which
// needs a column the open files lack, and retention moves the log start
// past it before the next poll (here: at once; live: while the loop waits
// for the commit in flight). The stopped poll's records wait in the
// session (session.carry), so every record is a row. 8b2e2c2 fetched them
// again: the sink stopped with a DataLossError for a record it had read
// (found by the review of 8b2e2c2).
func TestSchemaStopKeepsRecordsInHand(t *testing.T) {
	e := newEnv(t)
	const topic = "stopdeleted"
	e.Topic(topic, 1, nil)
	for round := range 3 {
		e.Produce(evolvingRecords(topic, 0, 200, 100, fmt.Sprint(round)))
	}
	tbl, dlq := e.TypedTable("lake.stopdeleted", mapping.Layout{Value: mapping.ValueJSON})
	var consumed int
	deleted := false
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(), DeadLetters: dlq,
		FlushRecords: 1_000_000, FlushInterval: time.Minute,
		OnConsumed: func(n int, _ int64) {
			consumed += n
			if consumed >= 400 && !deleted {
				// Retention, after the poll that stopped at 400.
				deleted = true
				if err := e.Stack.Cluster.DeleteRecords(topic, 0, 401); err != nil {
					t.Error(err)
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	connector.SetSpillBytes(s, 4<<10)
	_, err = s.Run(e.Ctx)
	if !deleted {
		t.Fatalf("the sink consumed %d records", consumed)
	}
	if err != nil {
		t.Fatalf("the sink read offset 400 and then failed for its loss: %v", err)
	}
	rs, _ := floetest.CheckWithDeadLetters(t, tbl, dlq, e.endOffsets(topic))
	if len(rs) != 600 {
		t.Errorf("%d rows, want 600: the sink had read every record before retention deleted [0, 401)", len(rs))
	}
}

// TestSchemaStopTransactions: new columns in every round, in plain
// records and in committed transactions, with aborted transactions and
// their markers between them, past the spill bytes: the poll stops at
// records inside and right after transactions, and the next one reads on
// from there. Every committed record must be a row once.
func TestSchemaStopTransactions(t *testing.T) {
	e := newEnv(t)
	const topic = "stoptxn"
	e.Topic(topic, 2, nil)
	want := 0
	for round := range 8 {
		var committed, aborted []*kgo.Record
		for p := range int32(2) {
			e.Produce(evolvingRecords(topic, p, 200, 100, fmt.Sprintf("p%d", round)))
			committed = append(committed, evolvingRecords(topic, p, 40, 100, fmt.Sprintf("t%d", round))...)
			aborted = append(aborted, evolvingRecords(topic, p, 40, 100, fmt.Sprintf("a%d", round))...)
			want += 240
		}
		e.Txn(fmt.Sprintf("%s-c%d", topic, round), committed, true)
		e.Txn(fmt.Sprintf("%s-a%d", topic, round), aborted, false)
	}
	tbl, dlq := e.TypedTable("lake.stoptxn", mapping.Layout{Value: mapping.ValueJSON})
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, StopAtEnd: true, Logger: quietLogger(), DeadLetters: dlq,
		FlushRecords: 1_000_000, FlushInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	connector.SetSpillBytes(s, 4<<10)
	st, err := s.Run(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commits", st.Commits)
	rs, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, e.endOffsets(topic))
	if len(rs) != want || len(dead) != 0 {
		t.Errorf("%d rows and %d dead letters, want %d rows", len(rs), len(dead), want)
	}
	auditComplete(t, e, tbl)
}

// TestSchemaStopGroupChurn: members join and leave a group while every
// round of records adds a column, past small spill bytes: polls stop at
// schema changes while partitions move (a stopped poll's partitions given
// up or taken on again before the next poll are skipped or fetched
// again). Every record a row once, audit complete.
func TestSchemaStopGroupChurn(t *testing.T) {
	e := newEnv(t)
	e.spillBytes = 4 << 10
	const topic, table, group = "stopchurn", "lake.stopchurn", "floe-stopchurn"
	e.Topic(topic, 4, nil)
	pr := e.produceRounds(4, 50*time.Millisecond, func(p int32, round int) []*kgo.Record {
		return evolvingRecords(topic, p, 20, 60, fmt.Sprintf("r%d", round%40))
	})
	var ms []*member
	for range 3 {
		tbl, dlq := e.TypedTable(table, mapping.Layout{Value: mapping.ValueJSON})
		cfg := groupConfig(topic, group)
		cfg.DeadLetters = dlq
		ms = append(ms, e.startMemberOn(tbl, cfg))
		time.Sleep(3 * time.Second)
	}
	ms[0].halt(t)
	time.Sleep(3 * time.Second)
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, table, want, 120*time.Second)
	for _, m := range ms[1:] {
		st := m.halt(t)
		t.Logf("member: %d rows, %d commits, %d fenced", st.Records, st.Commits, st.Fenced)
	}
	tbl, dlq := e.TypedTable(table, mapping.Layout{Value: mapping.ValueJSON})
	rs, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if int64(len(rs)) != produced || len(dead) != 0 {
		t.Fatalf("%d rows and %d dead letters, want %d rows", len(rs), len(dead), produced)
	}
	auditComplete(t, e, tbl)
}
