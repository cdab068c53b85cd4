package replay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/replay"
)

// TestBoundsPastOpenTxnNameIt: offsets 0-9,
// a transaction left open at offset 10, committed records 11-19. replay
// --until 0=15 is refused (right), but the error says offset 15 is "past
// its end offset 10: a replay reads only what the log holds at start":
// the log holds offsets up to 20; what stops the replay is the open
// transaction (as --until TIME's refusal says), and the fix is to run again
// once it ended, not to take a lower offset. It names the transaction now
// (from a review).
func TestBoundsPastOpenTxnNameIt(t *testing.T) {
	e := newEnv(t)
	const topic = "untilopen51"
	e.Topic(topic, 1, nil)
	base := e.produceSeconds(topic, 10)
	txn := e.OpenTxn("opentxn-until51")
	if err := txn.ProduceSync(e.Ctx, &kgo.Record{Topic: topic, Value: []byte("txn"), Timestamp: base.Add(10 * time.Second)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 11; i < 20; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	e.Produce(recs)
	for _, c := range []struct{ from, until string }{{"", "0=15"}, {"0=12", ""}} {
		opts := replay.Options{Topic: topic}
		if c.until != "" {
			opts.Until = bound(t, c.until, topic, false)
		}
		if c.from != "" {
			opts.From = bound(t, c.from, topic, true)
		}
		_, err := e.replay("lake.untilopen51", opts)
		if err == nil {
			t.Fatalf("from %q until %q past the last stable offset accepted", c.from, c.until)
		}
		if !strings.Contains(err.Error(), "transaction") {
			t.Errorf("from %q until %q: refusal does not name the open transaction that stops it (the log holds offsets up to 20): %v", c.from, c.until, err)
		}
	}
}
