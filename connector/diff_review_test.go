package connector_test

import (
	"context"
	"testing"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
)

// TestStopAtEndInterruptedAtSessionStart (from a review of this change
// set): a bounded run whose context ended as its session opened returned
// no Unfinished, so floe sink --stop-at-end exited 0; the partitions not
// taken to their end are recorded.
func TestStopAtEndInterruptedAtSessionStart(t *testing.T) {
	e := newEnv(t)
	const topic = "early"
	e.Topic(topic, 1, nil)
	e.Produce(records(topic, 0, 50, "a"))
	tbl := e.Table("lake.early")
	s, err := connector.NewSink(e.Dial(), tbl, connector.Config{Topic: topic, StopAtEnd: true, Logger: floetest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.Ctx)
	cancel() // SIGTERM as the session opens
	stats, err := s.Run(ctx)
	if err == nil && len(stats.Unfinished) == 0 {
		t.Errorf("bounded run interrupted before reading anything: err nil, Unfinished empty, %d rows of 50 (Next %v): reads as a finished run", stats.Records, stats.Next)
	}
}
