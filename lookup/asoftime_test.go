package lookup_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
)

// TestAsOfTimeCompactedTopic: a compacted topic is sunk whole, offsets 0-5
// stamped +0s..+5s; the broker then compacts away offsets 1 and 2 (their
// keys are written again at 3 and 4), keeping the log start at 0. as-of
// --time +2s cuts before offset 2, the table's first record stamped at or
// after +2s, with --brokers as without: the broker answers 3, and the
// table's column lowers it (the table as of +2s held the record stamped
// +2s).
func TestAsOfTimeCompactedTopic(t *testing.T) {
	e := floetest.New(t)
	const topic = "cmp"
	compact := "compact"
	e.Topic(topic, 1, map[string]*string{"cleanup.policy": &compact})
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i, k := range []string{"u0", "k1", "k2", "k1", "k2", "z"} {
		e.Produce([]*kgo.Record{{Topic: topic, Key: []byte(k), Value: []byte(k), Timestamp: base.Add(time.Duration(i) * time.Second)}})
	}
	tbl := e.Table("lake.cmp")
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: topic, StopAtEnd: true}); err != nil {
		t.Fatal(err)
	}
	e.Stack.Cluster.Compact()
	wm, err := e.Broker().Watermarks(t.Context(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if wm[0].LogStart != 0 {
		t.Fatalf("log start %d after compaction, want 0", wm[0].LogStart)
	}
	at := base.Add(2 * time.Second)
	for _, b := range []*connector.Broker{nil, e.Broker()} {
		r, err := lookup.AsOf(t.Context(), tbl, b, lookup.AsOfQuery{Time: &at})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Positions) != 1 || r.Positions[0].Offset != 2 {
			t.Errorf("as of +2s (brokers %v): positions %+v; want the cut at offset 2, the table's first record stamped at or after +2s", b != nil, r.Positions)
		}
	}
}

// TestAsOfTimeSubMicrosecond: records stamped +0s..+9s; as-of --time
// +5s+500ns cuts before offset 6 from the broker and from the table's
// column alike: the column holds microseconds, and the time was truncated
// to +5s, taking offset 5 (stamped before the time) for the first record
// at or after it.
func TestAsOfTimeSubMicrosecond(t *testing.T) {
	e, tbl := lookupEnv(t)
	at := time.UnixMilli(1_700_000_000_000).Add(5*time.Second + 500*time.Nanosecond)
	for _, b := range []*connector.Broker{e.Broker(), nil} {
		r, err := lookup.AsOf(t.Context(), tbl, b, lookup.AsOfQuery{Time: &at})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Positions) != 1 || r.Positions[0].Offset != 6 {
			t.Errorf("as of %s (brokers %v): positions %+v; want the cut at offset 6, the first record stamped at or after it", at.UTC().Format(time.RFC3339Nano), b != nil, r.Positions)
		}
	}
}
