package connector_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestPipelinesWatchTopics: a topic watch sinks each matching topic into a
// table of its own (lake.ev_TOPIC here), leaves other topics alone, and
// picks up a matching topic created while it runs; each table ends with
// its topic exactly once.
func TestPipelinesWatchTopics(t *testing.T) {
	e := newEnv(t)
	for _, topic := range []string{"ev.a", "ev.b", "other"} {
		e.Topic(topic, 2, nil)
		for p := range int32(2) {
			e.Produce(records(topic, p, 30, "x"))
		}
	}
	tableOf := func(topic string) string { return "lake." + strings.ReplaceAll(topic, ".", "_") }
	watch := &connector.TopicWatch{Match: regexp.MustCompile(`^ev\..*$`), Every: 300 * time.Millisecond,
		Pipeline: func(topic string) (connector.Pipeline, error) {
			return pipeline(tableOf(topic), topic, connector.Config{FlushInterval: 200 * time.Millisecond}), nil
		}}
	ctx, stop := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { done <- connector.Pipelines(nil).RunWatching(ctx, e.Dial(), e.catalog(), watch) }()
	for _, topic := range []string{"ev.a", "ev.b"} {
		waitLedger(t, e, tableOf(topic), e.endOffsets(topic), 30*time.Second)
	}
	e.Topic("ev.c", 3, nil)
	for p := range int32(3) {
		e.Produce(records("ev.c", p, 20, "late"))
	}
	waitLedger(t, e, tableOf("ev.c"), e.endOffsets("ev.c"), 30*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"ev.a", "ev.b", "ev.c"} {
		checkExactlyOnce(t, e.Table(tableOf(topic)), e.endOffsets(topic))
	}
	if e.tableExists(e.catalog(), "lake.other") {
		t.Error("a topic the pattern does not match was sunk")
	}
}

// TestPipelinesTopicsIntoOneTable: two topics sunk into one table by two
// pipelines of one process, each a member of one consumer group: the
// table's ledger holds both topics, each exactly once, and the audit is
// complete.
func TestPipelinesTopicsIntoOneTable(t *testing.T) {
	e := newEnv(t)
	want := map[mapping.TopicPartition]int64{}
	for _, topic := range []string{"orders", "payments"} {
		e.Topic(topic, 3, nil)
		for p := range int32(3) {
			e.Produce(records(topic, p, 40, topic))
		}
		for tp, n := range e.endOffsets(topic) {
			want[tp] = n
		}
	}
	ps := connector.Pipelines{
		pipeline("lake.all", "orders", groupConfig("orders", "floe-all")),
		pipeline("lake.all", "payments", groupConfig("payments", "floe-all")),
	}
	ctx, stop := context.WithCancel(e.Ctx)
	done := make(chan error, 1)
	go func() { done <- ps.Run(ctx, e.Dial(), e.catalog()) }()
	waitLedger(t, e, "lake.all", want, 60*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	tbl := e.Table("lake.all")
	if rs := checkExactlyOnce(t, tbl, want); len(rs) != 240 {
		t.Fatalf("%d rows, want 240", len(rs))
	}
	auditComplete(t, e, tbl)
}

// TestGroupMembersCreateTableTogether: members of a group started at the
// same moment race to create their table; every one of them opens it
// (the losers find the winner's) and the table ends exactly once.
func TestGroupMembersCreateTableTogether(t *testing.T) {
	e := newEnv(t)
	const topic = "together"
	e.Topic(topic, 3, nil)
	for p := range int32(3) {
		e.Produce(records(topic, p, 30, "x"))
	}
	ctx, stop := context.WithCancel(e.Ctx)
	done := make(chan error, 3)
	var started sync.WaitGroup
	for range 3 {
		p := pipeline("lake.together", topic, groupConfig(topic, "floe-together"))
		started.Add(1)
		p.OnStart = func(*snapshot.Table) { started.Done() }
		go func() { done <- connector.Pipelines{p}.Run(ctx, e.Dial(), e.catalog()) }()
	}
	started.Wait()
	want := e.endOffsets(topic)
	waitLedger(t, e, "lake.together", want, 60*time.Second)
	stop()
	for range 3 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	checkExactlyOnce(t, e.Table("lake.together"), want)
}
