package connector_test

// Adversarial review s38 of today's --on-truncate fix.

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/replay"
	"github.com/floe-dev/floe/snapshot"
)

// TestS38BranchReplayChangesMainOnTruncate: main's sink runs with
// --on-truncate delete-all, which the table records (floe.on-truncate).
// A replay onto a branch with --on-truncate dead-letter (to look at the
// truncates it would keep, nothing published) records its setting in the
// same table property, which is the table's, not the branch's: main's sink
// restarted without the flag then keeps every row through a truncate,
// making it a dead letter, where before the replay it deleted them.
func TestS38BranchReplayChangesMainOnTruncate(t *testing.T) {
	e := newEnv(t)
	const topic = "dbserver1.inventory.trunc_branch"
	_, cfg := e.truncatingTable(topic, "lake.trunc_branch")
	cat, ident := e.CatalogOf("lake.trunc_branch")
	res, err := replay.Run(e.Ctx, e.Dial(), cat, ident, replay.Options{Topic: topic, Branch: "try", Mode: mapping.ModeUpsert, Layout: cdcLayout(t, floetest.CDCPlainJSON),
		Sink: connector.Config{OnTruncate: connector.TruncateDeadLetter, Logger: floetest.QuietLogger()}})
	if err != nil || !res.Complete {
		t.Fatalf("replay onto branch try: %+v, %v", res, err)
	}
	// main's sink, restarted as before it was: without the flag.
	e.Produce([]*kgo.Record{dbzTruncate(topic, 2), dbzEvent(topic, "c", 3, "three@x", 3)})
	main, err := snapshot.Open(e.Ctx, cat, ident, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnTruncate = ""
	st, err := e.sink(main, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := latestIDs(t, main); !slices.Equal(got, []string{"3"}) || st.DeadLetters != 0 {
		t.Fatalf("main holds ids %v, %d dead letters after a truncate its sink (recorded delete-all) sank once a replay onto a branch ran with --on-truncate dead-letter; want only id 3 (%s=%q)",
			got, st.DeadLetters, mapping.PropOnTruncate, main.Iceberg().Properties()[mapping.PropOnTruncate])
	}
}
