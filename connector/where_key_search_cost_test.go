package connector_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
)

// TestWhereKeySearchCostPerCommit (from a review): where --key --brokers
// of a key no record has, on two Debezium tables of the same records (the
// same topic), one sunk in commits of 1000 records, one in commits of 50.
// The search read each commit's range with a read of its own, each
// fetching up to 8 MiB past the range's start: the cost grew with commits
// x log size (measured: 30000 records, 867 MiB allocated with 30 commits,
// 5.5 GiB with 600). It reads each partition once across the commits'
// ranges now, so both cost about the same.
func TestWhereKeySearchCostPerCommit(t *testing.T) {
	const n = 20000
	e := newEnv(t)
	const topic = "dbserver1.inventory.wk_perf"
	e.Topic(topic, 1, nil)
	var batch []*kgo.Record
	for i := range n {
		batch = append(batch, dbzEvent(topic, "c", i%5000, "someone@example.com", 0))
		if len(batch) == 5000 {
			e.Produce(batch)
			batch = nil
		}
	}
	cost := func(name string, flush int) (uint64, time.Duration) {
		tbl, dlq := e.debeziumTable(name, floetest.CDCPlainJSON)
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: flush, DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		r, err := lookup.WhereKey(e.Ctx, tbl, e.Broker(), `{"id":999999}`)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil || r.Status != lookup.KeyStatusNeverSeen {
			t.Fatalf("%+v, %v", r, err)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%d records in commits of %d: %s, %d MiB allocated", n, flush, took, alloc>>20)
		return alloc, took
	}
	few, _ := cost("lake.wk_few", 1000)
	many, _ := cost("lake.wk_many", 50)
	if many > 3*few {
		t.Fatalf("the same records searched: %d MiB in commits of 1000, %d MiB in commits of 50 (x%.1f): each range is a fetch of its own", few>>20, many>>20, float64(many)/float64(few))
	}
}
