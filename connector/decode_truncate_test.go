package connector_test

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
)

// TestTruncateDeadLetterSaysReplay: a Debezium truncate read without
// --on-truncate is a dead letter whose reason invited --on-truncate
// delete-all, but a sink restarted with it leaves that truncate as it is
// (it is committed): the rows stay. The reason says the flag applies to
// later truncates and names the replay that applies this one, with the
// table's name (it said TABLE). From new users' reports.
func TestTruncateDeadLetterSaysReplay(t *testing.T) {
	e := newEnv(t)
	const topic, name = "dbserver1.inventory.trdl", "lake.trdl"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable(name, floetest.CDCPlainJSON)
	cfg := connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}
	e.Produce([]*kgo.Record{dbzEvent(topic, "r", 1, "one@x", 0), dbzTruncate(topic, 1)})
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	dead := rows(t, dlq)
	if len(dead) != 1 {
		t.Fatalf("dead letters %+v, want the truncate", dead)
	}
	reason := dead[0].Columns[mapping.ColError]
	t.Logf("reason: %s", reason)
	cfg.OnTruncate = connector.TruncateDeleteAll
	if _, err := e.sink(tbl, cfg); err != nil {
		t.Fatal(err)
	}
	if got := latestIDs(t, tbl); len(got) != 1 {
		t.Fatalf("ids %v after a restart with --on-truncate delete-all, want id 1 still (the truncate is committed as a dead letter)", got)
	}
	for _, want := range []string{"applies to the truncates read after it, not to this one", "floe replay --topic " + topic + " --table " + name + " --envelope debezium --key json --value json --on-truncate delete-all --branch rebuild --publish"} {
		if !strings.Contains(reason, want) {
			t.Errorf("the truncate's reason %q does not say %q: a sink restarted with --on-truncate delete-all does nothing for it", reason, want)
		}
	}
}

// TestEmptyKeyReasonSaysNull: a Debezium truncate produced with kcat
// without -Z has an empty key, not a null one: its dead letter said "not
// valid JSON: empty (0 bytes)", where an empty value's says that kcat -Z
// sends it as null. The key's says so too now. From a new user's report.
func TestEmptyKeyReasonSaysNull(t *testing.T) {
	e := newEnv(t)
	const topic, name = "dbserver1.inventory.trempty", "lake.trempty"
	e.Topic(topic, 1, nil)
	tbl, dlq := e.debeziumTable(name, floetest.CDCPlainJSON)
	truncate := dbzTruncate(topic, 1)
	truncate.Key = []byte{}
	e.Produce([]*kgo.Record{dbzEvent(topic, "r", 1, "one@x", 0), truncate})
	if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, DeadLetters: dlq, Logger: quietLogger()}); err != nil {
		t.Fatal(err)
	}
	dead := rows(t, dlq)
	if len(dead) != 1 || !strings.Contains(dead[0].Columns[mapping.ColError], "kcat -Z sends an empty key as null") {
		t.Fatalf("dead letters %+v: want the truncate with an empty key, its reason saying that kcat -Z sends an empty key as null", dead)
	}
}
