package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestReviewS66DiffDebeziumEventsRerunKeepsDropAdvice: a table made of
// nothing but a Debezium topic's events, sunk without --envelope, is
// sunk again (a scheduled --stop-at-end job, more events since). The
// rows it held before the run are the same topic's events, the mistake
// the warning is about; it told the user that floe drop would lose them
// and to rebuild the table "from its own topic" with floe replay --topic
// RIGHT, of which there is none. Sink.heldRows asks whether the table
// holds rows, not rows of other topics (as tableWayBack's topicsWithRows
// does for the dead-letter exit).
func TestReviewS66DiffDebeziumEventsRerunKeepsDropAdvice(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(5, 5, 1)
	st, sink, _ := upsertStack(t, topic, 1, c.Records(t, floetest.CDCPlainJSON, ""))
	args := slices.Concat(sink, []string{"--table", "lake.customers", "--value", "json"})
	mustFloe(t, args...)
	c.Story(2, 3, 2)
	if err := localstack.Produce(t.Context(), st.Brokers, c.Records(t, floetest.CDCPlainJSON, "")); err != nil {
		t.Fatal(err)
	}
	code, out, errs := floe(t, args...)
	if code != exitOK || !strings.Contains(errs, "Debezium change events (op") {
		t.Fatalf("second run: exit %d, want 0 and the warning\n%s\n%s", code, out, errs)
	}
	if strings.Contains(errs, "floe replay --topic RIGHT") || !strings.Contains(errs, "floe drop --table lake.customers") {
		t.Errorf("a table of nothing but this topic's events, sunk again: the warning names floe replay --topic RIGHT, not floe drop\n%s", errs)
	}
}

// TestReviewS66DiffAuditTagOfUpsertTable: the rows and content levels of
// an upsert table read the ledger again (eachCommit) and index it by
// commit as it is read (commitIndex); audited on a tag whose head main
// has moved past (more upserts, deletes and dead letters of the same
// keys), they read the tag's ledger, not main's: both are COMPLETE.
func TestReviewS66DiffAuditTagOfUpsertTable(t *testing.T) {
	const topic = "prof"
	b := func(s string) []byte { return []byte(s) }
	st, sink, loc := upsertStack(t, topic, 1, []*kgo.Record{
		rec(topic, 0, b("u1"), b(`{"v":1}`), 1), rec(topic, 0, b("u2"), b(`{"v":2}`), 2),
		rec(topic, 0, b("u1"), b(`{not json`), 3), rec(topic, 0, b("u3"), b(`{"v":3}`), 4),
	})
	sink = append(sink, "--table", "lake.prof", "--mode", "upsert", "--key", "string", "--value", "json")
	mustFloe(t, sink...)
	cat, err := catalog.Open(t.Context(), st.Catalog())
	if err != nil {
		t.Fatal(err)
	}
	ident, _ := catalog.ParseIdent("lake.prof")
	tbl, err := cat.LoadTable(t.Context(), ident)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cat.CommitTable(t.Context(), ident, nil, []table.Update{table.NewSetSnapshotRefUpdate("pinned", tbl.CurrentSnapshot().SnapshotID, table.TagRef, -1, -1, -1)}); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{
		rec(topic, 0, b("u2"), b(`{broken`), 5), rec(topic, 0, b("u1"), b(`{"v":11}`), 6),
		rec(topic, 0, b("u3"), nil, 7), rec(topic, 0, b("u4"), b(`{"v":4}`), 8),
	}); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, sink...)
	s65AuditComplete(t, "lake.prof", st.Brokers[0], loc)
	s65AuditComplete(t, "lake.prof", st.Brokers[0], loc, []string{"--branch", "pinned"})
}

// TestReviewS66DiffDebeziumEventsReplayOntoBranchAdvice: a replay of a
// Debezium topic onto a branch of a table that keeps its events as they
// are (sunk with --envelope none) warns that they are change events;
// its way back is floe drop --branch of the replay's branch, not floe
// drop --table (main's rows with it), nor floe replay --topic RIGHT
// --branch rebuild, the run itself.
func TestReviewS66DiffDebeziumEventsReplayOntoBranchAdvice(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(5, 5, 1)
	st, sink, loc := upsertStack(t, topic, 1, c.Records(t, floetest.CDCPlainJSON, ""))
	mustFloe(t, slices.Concat(sink, []string{"--table", "lake.customers", "--value", "json", "--envelope", "none"})...)
	code, out, errs := floe(t, slices.Concat([]string{"replay", "-b", st.Brokers[0], "-t", topic, "--table", "lake.customers", "--branch", "rebuild"}, loc)...)
	if !strings.Contains(errs, "Debezium change events (op") {
		t.Skipf("replay onto a branch: exit %d, no warning\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "--branch rebuild") || strings.Contains(errs, "floe replay --topic RIGHT") || strings.Contains(errs, "remove this one with floe drop --table lake.customers,") {
		t.Errorf("replay of Debezium events onto branch rebuild: the warning's way back is not floe drop --branch rebuild\n%s", errs)
	}
}
