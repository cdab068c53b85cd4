package connector_test

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
)

// TestAuditTruncateEdges: tables a sink made of truncates
// (--on-truncate delete-all) in situations around the audit's new rule:
// each is right, so the content level must call it complete.
func TestAuditTruncateEdges(t *testing.T) {
	e := newEnv(t)
	ev := func(topic string, p int32, op string, id int, email string, sec int) *kgo.Record {
		r := dbzEvent(topic, op, id, email, sec)
		r.Partition = p
		return r
	}
	trunc := func(topic string, p int32, sec int) *kgo.Record {
		r := dbzTruncate(topic, sec)
		r.Partition = p
		return r
	}
	t.Run("dead-lettered then applied", func(t *testing.T) {
		const name = "rev_s56_trunc_changed"
		topic := "dbserver1.inventory." + name
		e.Topic(topic, 1, nil)
		tbl, dlq := e.debeziumTable("lake."+name, floetest.CDCPlainJSON)
		cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq}
		e.Produce([]*kgo.Record{ev(topic, 0, "c", 1, "one@x", 0), trunc(topic, 0, 1), ev(topic, 0, "c", 2, "two@x", 2)})
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		cfg.OnTruncate = connector.TruncateDeleteAll
		e.Produce([]*kgo.Record{ev(topic, 0, "c", 3, "three@x", 3), trunc(topic, 0, 4), ev(topic, 0, "c", 4, "four@x", 5)})
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"4": "four@x"}
		if got := emails(t, tbl); !maps.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
		requireComplete(t, auditContent(t, e, tbl, nil), "a truncate dead-lettered, a later one applied")
	})
	t.Run("truncate lost to retention", func(t *testing.T) {
		const name = "rev_s56_trunc_retention"
		topic := "dbserver1.inventory." + name
		e.Topic(topic, 2, nil)
		tbl, dlq := e.debeziumTable("lake."+name, floetest.CDCPlainJSON)
		cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 100, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
		e.Produce([]*kgo.Record{ev(topic, 0, "c", 1, "one@x", 0), ev(topic, 1, "c", 5, "five@x", 1)})
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		e.Produce([]*kgo.Record{trunc(topic, 0, 2), ev(topic, 0, "c", 3, "three@x", 3)})
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"3": "three@x"}
		if got := emails(t, tbl); !maps.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
		// Retention removes partition 0's log up to the truncate's
		// successor: the truncate record is gone.
		if err := e.Stack.Cluster.DeleteRecords(topic, 0, 2); err != nil {
			t.Fatal(err)
		}
		requireComplete(t, auditContent(t, e, tbl, nil), "a truncate whose record retention removed")
	})
	t.Run("truncates in two partitions of one commit, a later timestamp elsewhere", func(t *testing.T) {
		const name = "rev_s56_trunc_two"
		topic := "dbserver1.inventory." + name
		e.Topic(topic, 2, nil)
		tbl, dlq := e.debeziumTable("lake."+name, floetest.CDCPlainJSON)
		cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 1000, DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
		e.Produce([]*kgo.Record{ev(topic, 0, "c", 1, "one@x", 0), ev(topic, 1, "c", 2, "two@x", 1)})
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		// p0: id 7 (late ts), truncate, id 8; p1: id 7 (early ts), truncate, id 7 again (earliest ts), id 9.
		e.Produce([]*kgo.Record{ev(topic, 0, "u", 7, "seven@p0a", 50), trunc(topic, 0, 51), ev(topic, 0, "c", 8, "eight@x", 52),
			ev(topic, 1, "c", 7, "seven@p1a", 40), trunc(topic, 1, 41), ev(topic, 1, "u", 7, "seven@p1b", 10), ev(topic, 1, "c", 9, "nine@x", 42)})
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"7": "seven@p1b", "8": "eight@x", "9": "nine@x"}
		if got := emails(t, tbl); !maps.Equal(got, want) {
			t.Fatalf("rows %v, want %v", got, want)
		}
		requireComplete(t, auditContent(t, e, tbl, nil), "truncates in two partitions of one commit")
	})
}
