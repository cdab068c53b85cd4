package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLiveBusySinkRereadsQuietPartitionAfterPublish (from a review): a
// replay published with --until below main's head on one partition only
// (orders/0) moves main back there, while the other partitions' ends are
// main's. docs/replay.md says a running sink reads those offsets again "at
// its next commit, or within 10 s when it is idle at the end of the log".
// A sink that keeps committing another partition (orders/1, busy) is never
// idle, and its commits, which do not touch orders/0, are not fenced
// (settle checks only the partitions a commit carries): orders/0 stays
// back, its offsets unsunk, for as long as it receives no record, however
// long the sink runs; retention may then delete them (a loss the sink
// stops on at its next session). The commit check knows each partition's
// next offset in the ledger (checkStart's known); a partition of the
// session that the ledger now holds below the session's position should end
// the session, as checkLedgerBack does when idle.
func TestLiveBusySinkRereadsQuietPartitionAfterPublish(t *testing.T) {
	lo := startLiveOrders(t, 3*time.Minute, "--flush-interval", "200ms", "--lag-interval", "200ms")
	before, _ := lo.next()
	out := mustFloe(t, append([]string{"replay", "-b", lo.brokers, "--topic", "orders", "--table", "lake.orders",
		"--branch", "rb", "--until", fmt.Sprintf("0=10,1=%d,2=%d", before[1], before[2]), "--publish"}, lo.loc...)...)
	if !strings.Contains(out, "main went back") {
		t.Fatalf("the publish did not move main back:\n%s", out)
	}
	if got, _ := lo.next(); got[0] != 10 || got[1] != before[1] {
		t.Fatalf("after the publish main is at %v, want orders/0 at 10 and the others at %v", got, before)
	}
	// orders/1 stays busy: a record every 20 ms.
	stopProducing := lo.produceEvery(1, 20*time.Millisecond)
	var got map[int32]int64
	ok := waitForOK(25*time.Second, func() bool {
		got, _ = lo.next()
		return got[0] == before[0]
	})
	stopProducing()
	lo.stop()
	if !ok {
		t.Errorf("25 s after the publish moved orders/0 back from %d to 10, with orders/1 busy, the live sink had not read orders/0 again: table next offsets %v (orders/0 received nothing new)", before[0], got)
	}
}
