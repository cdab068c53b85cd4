package lookup_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
)

// TestAsOfTimeUpsertCompactedTopic: an upsert table (keyed
// by the Kafka key) of the compacted topic u, records u0=x k2=v1 k2=v2
// k3=v3 stamped +0s..+3s, committed one by one. The broker then compacts
// away offset 1 (k2 is written again; the log start stays 0). The log's
// first record stamped at or after +1s was offset 1 (k2=v1), so the table
// as of +1s is {u0=x}. An upsert table cannot take the time from its
// column, so as-of --time asks the broker, which no longer has offset 1 and
// answers 2: floe prints the state at offset 2, {u0=x, k2=v1}, exact,
// exit 0 — a row too many. An append table's column lowers the broker's
// cut in this case (TestAsOfTimeCompactedTopic); an upsert table's as-of
// took the broker's cut as it is, without a word. It says now that the
// state is not exact, naming the compacted topic (from a review).
func TestAsOfTimeUpsertCompactedTopic(t *testing.T) {
	e := floetest.New(t)
	compact := "compact"
	e.Topic("u", 1, map[string]*string{"cleanup.policy": &compact})
	tbl, dlq := e.UpsertTable("lake.u")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	for i, kv := range []string{"u0=x", "k2=v1", "k2=v2", "k3=v3"} {
		k, v, _ := strings.Cut(kv, "=")
		e.Produce([]*kgo.Record{{Topic: "u", Key: []byte(k), Value: []byte(v), Timestamp: base.Add(time.Duration(i) * time.Second)}})
	}
	if _, err := e.Sink(e.Broker(), tbl, connector.Config{Topic: "u", StopAtEnd: true, FlushRecords: 1, DeadLetters: dlq}); err != nil {
		t.Fatal(err)
	}
	if wm, err := e.Broker().Watermarks(t.Context(), "u"); err != nil || wm[0].LogStart != 0 {
		t.Fatalf("log start %v, %v; want 0", wm, err)
	}
	e.Stack.Cluster.Compact()
	if wm, err := e.Broker().Watermarks(t.Context(), "u"); err != nil || wm[0].LogStart != 0 {
		t.Fatalf("log start after compaction %+v, %v; want 0", wm, err)
	}
	// Truth from the log as produced (offset i stamped +i s): the first
	// record at or after +1s is offset 1.
	at := base.Add(time.Second)
	r, err := lookup.AsOf(t.Context(), tbl, e.Broker(), lookup.AsOfQuery{Time: &at})
	if err != nil {
		t.Logf("refused: %v", err)
		return
	}
	if *r.Exact || !slices.Equal(r.Compacted, []string{"u"}) {
		t.Errorf("as-of --time +1s --brokers of an upsert table of a compacted topic: positions %+v exact %v compacted %v; want not exact, naming topic u (offset 1, stamped +1s, was compacted away since the table read it)",
			r.Positions, *r.Exact, r.Compacted)
	}
}
