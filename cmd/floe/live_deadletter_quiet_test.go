package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/catalog"
	"github.com/floe-dev/floe/localstack"
	"github.com/floe-dev/floe/snapshot"
)

// TestLiveDeadLetterIntoTableWithRows (from a new user): a live sink
// (without --stop-at-end) whose commit held only dead letters warned
// "every record of this commit is a dead letter: check that --value, --key
// and --schema-registry match how the topic's records are written" even
// when the table already held rows of the topic: one malformed record on a
// quiet topic, whose flags are right. floe sink --stop-at-end already
// exempts such a table from its exit 3; the live warning now says the
// layout fits and names floe dead-letters instead. A schema registry given
// to the sink of this JSON table (a local stack's env.sh sets
// FLOE_SCHEMA_REGISTRY) is not used, and brought the advice back (from a
// new-user run).
func TestLiveDeadLetterIntoTableWithRows(t *testing.T) {
	st, loc := sinkStack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	done := liveFloe(ctx, append([]string{"sink", "--brokers", st.Brokers[0], "--topic", "orders", "--table", "lake.quiet", "--value", "json",
		"--flush-interval", "200ms", "--schema-registry", st.Registry}, loc...)...)
	// The table is read directly: a floe command run beside the sink
	// would take the process's logger, and the sink's log with it.
	counts := func() (rows, dead int64) {
		cat, err := catalog.Open(t.Context(), st.Catalog())
		if err != nil {
			return 0, 0
		}
		tbl, err := snapshot.Open(t.Context(), cat, table.Identifier{"lake", "quiet"}, snapshot.OpenOptions{})
		if err != nil {
			return 0, 0
		}
		sum, err := tbl.Summary(t.Context(), 0)
		if err != nil {
			return 0, 0
		}
		for _, p := range sum.Parts {
			rows, dead = rows+p.Records, dead+p.DeadLetters
		}
		return rows, dead
	}
	waitFor(t, time.Minute, "the live sink's 300 rows", func() bool { n, _ := counts(); return n == 300 })
	if err := localstack.Produce(t.Context(), st.Brokers, []*kgo.Record{{Topic: "orders", Partition: 0, Value: []byte("not json")}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the malformed record's dead letter", func() bool { _, d := counts(); return d == 1 })
	cancel()
	r := <-done
	if strings.Contains(r.errs, "check that --value, --key and --schema-registry match") ||
		!strings.Contains(r.errs, "every record of this commit is a dead letter: the table holds rows of topic orders") {
		t.Errorf("a live sink's dead-letter-only commit into a table holding rows of the topic logged:\n%s\nwant the warning without the advice to check the layout flags", lastLines(r.errs, 15))
	}
}
