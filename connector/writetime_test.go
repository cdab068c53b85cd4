package connector_test

import (
	"testing"
	"time"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// TestWriteTimeCountsFinishingFiles (from an operator's run): a sink's
// flush streams its rows into Parquet as they are consumed, and the
// commit's WriteTime (floe_write_duration_seconds, the "write" of the
// committed log line) timed only what the commit wrote itself, nothing
// for a streamed flush: 3.2e-05 s over five flushes of 15,000 rows. It
// counts finishing the flush's files (closing them, writing its shared
// files), which for 100,000 rows is well above a millisecond.
func TestWriteTimeCountsFinishingFiles(t *testing.T) {
	e := newEnv(t)
	const topic, n = "wt", 100_000
	e.ProduceBench(topic, n)
	var write time.Duration
	cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: n, OnCommit: func(res snapshot.Result) {
		if res.Rows > 0 {
			write += res.WriteTime
		}
	}}
	stats, err := e.Sink(e.Broker(), e.Table("bench.wt"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Records != n || write < time.Millisecond {
		t.Errorf("%d rows; WriteTime %s, want the time its files took to finish (well above 1 ms)", stats.Records, write)
	}
}
