package connector_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/snapshot"
)

// TestReviewS62DiffUpsertGroupModel (review of the diff 13219fd..HEAD):
// the model of TestReviewS62UpsertModelAcrossPartitions over 8 partitions,
// so that a flush's small partitions (more than 4) share files recorded
// as one file group of the ledger. Keys in several partitions, tombstones,
// keyless dead letters, tied timestamps, and flushes in which some
// partitions hold only tombstones or only dead letters (no row, so no
// span), random flush sizes and a compaction every other round. The table
// must be the independent fold at its head and at commit boundaries (as-of),
// and the audit (rows, content) must find nothing.
func TestReviewS62DiffUpsertGroupModel(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { s62DiffGroupModel(t, seed) })
	}
}

func s62DiffGroupModel(t *testing.T, seed uint64) {
	e := newEnv(t)
	const topic, parts = "s62groups", 8
	e.Topic(topic, parts, nil)
	tbl, dlq := e.upsertTable("lake.s62groups")
	rng := rand.New(rand.NewPCG(6262, seed))
	log := map[int32][]s62Rec{}
	base := time.Unix(1_700_000_000, 0)
	n := 0
	for round := range 6 {
		var recs []*kgo.Record
		for range 60 + rng.IntN(60) {
			n++
			p := int32(rng.IntN(parts))
			var k, v *string
			switch {
			case p == 7 && round%2 == 0:
				// A partition of tombstones only this round.
				k = ptr(fmt.Sprintf("k%d", rng.IntN(9)))
			case p == 6 && round%3 == 0:
				// A partition of dead letters only this round.
			default:
				if rng.IntN(20) != 0 {
					k = ptr(fmt.Sprintf("k%d", rng.IntN(9)))
				}
				if rng.IntN(6) != 0 {
					v = ptr(fmt.Sprintf("v%d-p%d", n, p))
				}
			}
			ts := base.Add(time.Duration(round*10+rng.IntN(6)) * time.Second)
			r := &kgo.Record{Topic: topic, Partition: p, Timestamp: ts}
			if k != nil {
				r.Key = []byte(*k)
			}
			if v != nil {
				r.Value = []byte(*v)
			}
			recs = append(recs, r)
			log[p] = append(log[p], s62Rec{key: k, value: v, ts: ts})
		}
		e.Produce(recs)
		if _, err := e.sink(tbl, connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 40 + rng.IntN(60), DeadLetters: dlq}); err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 {
			if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{TargetFileSize: 1 << 20, Logger: quietLogger()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for _, c := range l.Commits {
		groups += len(c.FileGroups)
	}
	if groups == 0 {
		t.Fatalf("no commit of %d recorded a file group: the test does not reach the shared files", len(l.Commits))
	}
	t.Logf("%d file groups", groups)
	s62Check(t, e, tbl, log)
}
