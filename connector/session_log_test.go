package connector_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
)

// TestSessionStartedCountsAllPartitions: the log line "sink session
// started" of a run over a topic of 4 partitions, one of which has
// records, said partitions=1: it counted the partitions with records to
// read, and a new user took 3 partitions for missing. partitions counts
// every partition the session covers, to_read those with records to read.
func TestSessionStartedCountsAllPartitions(t *testing.T) {
	e := newEnv(t)
	e.Topic("four", 4, nil)
	e.Produce(records("four", 0, 10, "a"))
	var buf floetest.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	if _, err := e.sink(e.Table("lake.four"), connector.Config{Topic: "four", StopAtEnd: true, Logger: log}); err != nil {
		t.Fatal(err)
	}
	var started []map[string]any
	for line := range bytes.Lines([]byte(buf.String())) {
		var l map[string]any
		if json.Unmarshal(line, &l) == nil && l["msg"] == "sink session started" {
			started = append(started, l)
		}
	}
	if len(started) != 1 || started[0]["partitions"] != 4.0 || started[0]["to_read"] != 1.0 {
		t.Fatalf("sink session started: %v; want one line with partitions 4, to_read 1\n%s", started, buf.String())
	}
}
