package main

import (
	"slices"
	"strings"
	"testing"

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
