package connector_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/mapping"
)

// TestReviewTypedGroupChurn: members of one group sink schemaless JSON
// whose fields keep appearing (each member evolves the one schema, so
// their streamed files race each other's schema changes: ErrSchemaMoved,
// SchemaChangedError) with some records that are dead letters, while
// members are restarted. Every offset ends once, as a row or a dead
// letter, and the audit is complete.
func TestReviewTypedGroupChurn(t *testing.T) {
	e := newEnv(t)
	const topic, tableName, group = "typed", "lake.typed", "floe-typed"
	const parts = 4
	e.Topic(topic, parts, nil)
	layout := mapping.Layout{Value: mapping.ValueJSON}
	tbl, dlq := e.TypedTable(tableName, layout)

	ctx, stopProducing := context.WithCancel(e.Ctx)
	var produced atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for round := 0; ctx.Err() == nil; round++ {
			for p := range int32(parts) {
				var values []string
				for i := range 10 {
					switch {
					case i == 7 && round%3 == 0:
						values = append(values, `not json`)
					default:
						// A new field every few rounds, per partition.
						values = append(values, fmt.Sprintf(`{"id":%d,"p%d_f%d":%d}`, i, p, round/4, round))
					}
				}
				e.Produce(jsonRecords(topic, p, values...))
				produced.Add(int64(len(values)))
			}
			time.Sleep(40 * time.Millisecond)
		}
	})

	start := func() *member {
		own, ownDLQ := e.TypedTable(tableName, layout)
		cfg := groupConfig(topic, group)
		cfg.FlushInterval = 150 * time.Millisecond
		cfg.RebalanceTimeout = 6 * time.Second
		cfg.DeadLetters = ownDLQ
		return e.startMemberOn(own, cfg)
	}
	members := []*member{start(), start()}
	r := rand.New(rand.NewPCG(3, 4))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(2000+r.IntN(1500)) * time.Millisecond)
		i := r.IntN(len(members))
		members[i].halt(t)
		members[i] = start()
	}
	stopProducing()
	wg.Wait()
	want := e.endOffsets(topic)
	waitLedger(t, e, tableName, want, 90*time.Second)
	for i, m := range members {
		st := m.halt(t)
		t.Logf("member %d: %d rows, %d dead letters, %d commits, %d fenced, %d retries", i, st.Records, st.DeadLetters, st.Commits, st.Fenced, st.Retries)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	rows, dead := floetest.CheckWithDeadLetters(t, tbl, dlq, want)
	if int64(len(rows)+len(dead)) != produced.Load() {
		t.Fatalf("%d rows and %d dead letters, want %d records", len(rows), len(dead), produced.Load())
	}
	auditComplete(t, e, tbl)
}
