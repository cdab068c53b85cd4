package connector_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewGroupChurnWithMaintenance: group members come and go while
// records are produced, every member expires snapshots after its commits
// (aggressive retention: segments written, merged and absorbed by several
// maintainers at once), and beside them a compaction loop and a
// floe-maintain loop run on handles of their own. The table must end with
// every offset exactly once and a complete audit (content compared).
func TestReviewGroupChurnWithMaintenance(t *testing.T) {
	e := newEnv(t)
	const topic, tableName, group = "churn", "lake.churn", "floe-churn"
	e.Topic(topic, 6, nil)
	tbl := e.Table(tableName)
	if err := tbl.SetProperties(e.Ctx, map[string]string{
		table.MinSnapshotsToKeepKey: "1", snapshot.PropMaxSnapshots: "1", table.MaxSnapshotAgeMsKey: "1",
	}); err != nil {
		t.Fatal(err)
	}
	pr := e.produceContinuously(topic, 6, 20, 30*time.Millisecond)

	bg, stopBG := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	var bgErrs sync.Map
	var compactions, expired atomic.Int64
	wg.Go(func() {
		c := e.Table(tableName)
		for bg.Err() == nil {
			res, err := c.Compact(bg, snapshot.CompactOptions{Logger: quietLogger()})
			if err != nil && bg.Err() == nil {
				bgErrs.Store(fmt.Sprint("compact: ", err), true)
			}
			if res.SnapshotID != 0 {
				compactions.Add(1)
			}
			time.Sleep(300 * time.Millisecond)
		}
	})
	wg.Go(func() {
		m := e.Table(tableName)
		for bg.Err() == nil {
			res, err := m.Maintain(bg, snapshot.MaintainOptions{Expire: true, ExpireOlderThan: time.Millisecond, RetainLast: 1,
				RemoveDebris: true, OrphanMinAge: time.Hour, Logger: quietLogger()})
			if err != nil && bg.Err() == nil {
				bgErrs.Store(fmt.Sprint("maintain: ", err), true)
			}
			expired.Add(int64(len(res.Expired)))
			time.Sleep(2 * time.Second)
		}
	})

	cfg := func() connector.Config {
		c := groupConfig(topic, group)
		c.FlushInterval = 100 * time.Millisecond
		c.RebalanceTimeout = 6 * time.Second
		return c
	}
	maintained := 0
	halt := func(m *member) { maintained += m.halt(t).Maintenance }
	members := []*member{e.startMember(tableName, cfg()), e.startMember(tableName, cfg())}
	r := rand.New(rand.NewPCG(1, 2))
	deadline := time.Now().Add(25 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(1500+r.IntN(1500)) * time.Millisecond)
		i := r.IntN(len(members))
		halt(members[i])
		members[i] = e.startMember(tableName, cfg())
		if len(members) < 3 && r.IntN(2) == 0 {
			members = append(members, e.startMember(tableName, cfg()))
		}
	}
	produced := pr.halt()
	want := e.endOffsets(topic)
	waitLedger(t, e, tableName, want, 90*time.Second)
	stopBG()
	wg.Wait()
	for _, m := range members {
		halt(m)
	}
	bgErrs.Range(func(k, _ any) bool { t.Logf("background: %v", k); return true })
	t.Logf("%d records; %d compactions, %d snapshots expired by the maintain loop, %d in-sink maintenance runs", produced, compactions.Load(), expired.Load(), maintained)
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	if rs := checkExactlyOnce(t, tbl, want); int64(len(rs)) != produced {
		t.Fatalf("%d rows, want %d", len(rs), produced)
	}
	auditComplete(t, e, tbl)
}
