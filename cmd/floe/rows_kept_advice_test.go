package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/localstack"
)

// TestDebeziumEventsIntoTableOfRowsNotDropAdvice: the warning of a sink
// of Debezium change events without --envelope debezium named floe drop
// of the table, also of one that held another topic's rows before the
// run, which dropping would lose. Such a table gets docs/deployment.md's
// way back for a wrong --topic instead; a table the run created keeps the
// drop advice (TestDebeziumEventsWarnedWhateverValue).
func TestDebeziumEventsIntoTableOfRowsNotDropAdvice(t *testing.T) {
	const topic = "dbserver1.inventory.customers"
	c := floetest.NewCustomers(topic, 1)
	c.Story(5, 5, 1)
	st, sink, _ := upsertStack(t, topic, 1, c.Records(t, floetest.CDCPlainJSON, ""))
	if err := localstack.CreateTopic(t.Context(), st.Brokers, "orders", 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := localstack.Produce(t.Context(), st.Brokers, localstack.DemoEvents("orders", 1, 20, time.Now().Add(-time.Hour), 1)); err != nil {
		t.Fatal(err)
	}
	orders := slices.Clone(sink)
	orders[slices.Index(orders, topic)] = "orders"
	mustFloe(t, slices.Concat(orders, []string{"--table", "lake.orders", "--value", "json"})...)
	code, out, errs := floe(t, slices.Concat(sink, []string{"--table", "lake.orders", "--value", "json"})...)
	const events = "Debezium change events (op"
	want := "floe replay --topic RIGHT --table lake.orders --branch rebuild --publish --publish-different"
	if code != exitOK || !strings.Contains(errs, events) || !strings.Contains(errs, want) || !strings.Contains(out, want) ||
		strings.Contains(errs, "floe drop --table") || strings.Contains(out, "floe drop --table") {
		t.Errorf("Debezium events into a table of rows: exit %d, want 0 and the warning naming %q in the log and the summary, no floe drop\n%s\n%s", code, want, out, errs)
	}
}

// TestReplayOnlyDeadLettersKeepsRows: a replay that made only dead letters
// exited 3 naming floe drop --table of its target, which for a replay onto
// a branch named the table (and its main's rows) as "lake.orders branch
// rebuild". A branch is removed with floe drop --branch, which leaves main
// and its rows; a table the replay created, without rows, keeps the drop
// advice.
func TestReplayOnlyDeadLettersKeepsRows(t *testing.T) {
	const topic = "orders"
	var recs []*kgo.Record
	for i := range 5 {
		recs = append(recs, rec(topic, 0, []byte(fmt.Sprint(i)), []byte(fmt.Sprintf(`{"id":%d}`, i)), i))
	}
	st, sink, loc := upsertStack(t, topic, 1, recs)
	mustFloe(t, slices.Concat(sink, []string{"--table", "lake.orders", "--value", "json"})...)
	var bad []*kgo.Record
	for i := range 3 {
		bad = append(bad, rec(topic, 0, []byte("b"), []byte("not json"), 10+i))
	}
	if err := localstack.Produce(t.Context(), st.Brokers, bad); err != nil {
		t.Fatal(err)
	}
	mustFloe(t, slices.Concat(sink, []string{"--table", "lake.orders"})...)
	replay := slices.Concat([]string{"replay", "-b", st.Brokers[0], "-t", topic, "--from", "0=5"}, loc)
	code, out, errs := floe(t, slices.Concat(replay, []string{"--table", "lake.orders", "--branch", "rebuild"})...)
	want := "floe drop --table lake.orders --branch rebuild --yes"
	if code != exitOnlyDeadLetters || !strings.Contains(errs, want) || strings.Contains(errs, "floe drop --table lake.orders,") || strings.Contains(errs, "floe drop --table lake.orders branch") {
		t.Errorf("replay of dead letters onto a branch: exit %d, want %d and %q\n%s\n%s", code, exitOnlyDeadLetters, want, out, errs)
	}
	code, out, errs = floe(t, slices.Concat(replay, []string{"--table", "lake.fresh", "--value", "json"})...)
	if code != exitOnlyDeadLetters || !strings.Contains(errs, "floe drop --table lake.fresh,") {
		t.Errorf("replay of dead letters into a new table: exit %d, want %d and the drop advice\n%s\n%s", code, exitOnlyDeadLetters, out, errs)
	}
}
