package connector_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/mapping"
)

// foldAt is the fold of the records produced to each partition (in offset
// order, from offset 0) below the ledger's next offset of the partition:
// the value each live key must have.
func foldAt(produced map[int32][]*kgo.Record, next map[mapping.TopicPartition]int64) map[string]string {
	want := map[string]string{}
	for tp, n := range next {
		for _, r := range produced[tp.Partition][:n] {
			if r.Value == nil {
				delete(want, string(r.Key))
			} else {
				want[string(r.Key)] = string(r.Value)
			}
		}
	}
	return want
}

// TestUpsertSinkSurvivesSIGKILL kills an upsert sink process (--mode
// upsert --key string, this test binary re-executed) with SIGKILL 30 times
// at random points of its work while more changes arrive, and restarts it
// each time. After every kill the table, read with iceberg-go's scan
// (equality deletes applied), is exactly the fold of the log over the
// ledger's ranges (every key's latest record below the ledger's next
// offset), and the ledger is gapless from offset 0 with every offset
// counted; after a last run to the end, the fold of the whole log. About
// 40-60 s on two cores: each run is a process start, a kfake consumer and
// a catalog open, most killed before or during their first commits.
func TestUpsertSinkSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs many processes")
	}
	e := newEnv(t)
	const topic, tableName, kills = "changes", "lake.changes", 30
	e.Topic(topic, 2, nil)
	u := newUpsertLog(topic, 2, 500, 5)
	produced := map[int32][]*kgo.Record{}
	produce := func(n int) {
		recs := u.next(n)
		e.Produce(recs)
		for _, r := range recs {
			produced[r.Partition] = append(produced[r.Partition], r)
		}
	}
	produce(3000)
	tbl, _ := e.upsertTable(tableName)
	check := func(when string) map[mapping.TopicPartition]int64 {
		t.Helper()
		if err := tbl.Refresh(e.Ctx); err != nil {
			t.Fatal(err)
		}
		l, err := tbl.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		next := l.Next()
		for tp, n := range next {
			c := mapping.Cover(l.Ranges(tp))
			if c.First != 0 || c.Next != n || len(c.Gaps)+len(c.Overlaps) > 0 || c.Records+c.Deletes+c.DeadLetters+c.Skipped != n {
				t.Fatalf("%s: %s: ledger coverage %+v, want [0, %d) gapless with every offset counted", when, tp, c, n)
			}
		}
		checkFold(t, tbl, foldAt(produced, next), when)
		return next
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var commitKills, emptyKills int
	start := time.Now()
	for i := range kills {
		before := tbl.Head()
		cmd := e.childCmdFrom(topic, tableName, 100+rng.IntN(400), true, connector.StartEarliest, "")
		cmd.Env = append(cmd.Env, "FLOE_TEST_MODE="+string(mapping.ModeUpsert))
		killWhileSinking(t, cmd, rng, 600*time.Millisecond)
		check(fmt.Sprintf("after kill %d", i+1))
		switch head := tbl.Head(); {
		case head == nil || (before != nil && head.SnapshotID == before.SnapshotID):
			emptyKills++
		default:
			commitKills++
		}
		produce(200 + rng.IntN(400))
	}
	t.Logf("%d kills in %s: %d after at least one commit of that run, %d before any", kills, time.Since(start).Round(time.Second), commitKills, emptyKills)
	if commitKills == 0 {
		t.Fatal("no run committed before it was killed: the kills came too early to prove anything")
	}
	cmd := e.childCmdFrom(topic, tableName, 1000, true, connector.StartEarliest, "")
	cmd.Env = append(cmd.Env, "FLOE_TEST_MODE="+string(mapping.ModeUpsert))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	next := check("after the last run")
	for tp, high := range e.endOffsets(topic) {
		if next[tp] != high {
			t.Fatalf("%s: ledger next %d, high watermark %d", tp, next[tp], high)
		}
	}
}
