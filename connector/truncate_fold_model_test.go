package connector_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/floe-dev/floe/connector"
	"github.com/floe-dev/floe/internal/floetest"
	"github.com/floe-dev/floe/lookup"
	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// foldEvent is one produced Debezium event of the model.
type foldEvent struct {
	op   string // c, u, d, - (tombstone), t (truncate)
	id   int
	tp   mapping.TopicPartition
	off  int64
	ts   time.Time
	mail string
}

// foldRemoval is how the model says a key without a row lost it.
type foldRemoval struct {
	byTruncate bool
	tp         mapping.TopicPartition
	off        int64
}

// foldModel folds the produced events over the ledger's commits as the
// sink documents it (snapshot.upsertChanges): per commit, a truncate
// removes every earlier commit's row and its own partition's records
// before it; per partition the latest record of a key; across partitions
// mapping.Winner; a Debezium tombstone changes nothing.
func foldModel(t *testing.T, commits []mapping.Commit, evs []foldEvent) (rows map[int]foldEvent, removed map[int]foldRemoval) {
	t.Helper()
	rows, removed = map[int]foldEvent{}, map[int]foldRemoval{}
	for _, c := range commits {
		var in []foldEvent
		cut := map[mapping.TopicPartition]int64{}
		for _, r := range c.Ranges {
			for _, ev := range evs {
				if ev.tp == r.TopicPartition && ev.off >= r.Low && ev.off < r.High {
					in = append(in, ev)
					if ev.op == "t" {
						cut[ev.tp] = max(cut[ev.tp], ev.off+1)
					}
				}
			}
		}
		if len(cut) > 0 {
			var tr foldEvent
			for _, ev := range in {
				if ev.op == "t" {
					tr = ev
				}
			}
			for id := range rows {
				removed[id] = foldRemoval{byTruncate: true, tp: tr.tp, off: tr.off}
			}
			rows = map[int]foldEvent{}
		}
		latest := map[int]map[mapping.TopicPartition]foldEvent{}
		for _, ev := range in {
			if ev.op == "t" {
				continue
			}
			if c, ok := cut[ev.tp]; ok && ev.off < c {
				// Its row went with the truncate.
				if _, has := removed[ev.id]; !has || true {
					removed[ev.id] = foldRemoval{byTruncate: true, tp: ev.tp, off: c - 1}
				}
				continue
			}
			if latest[ev.id] == nil {
				latest[ev.id] = map[mapping.TopicPartition]foldEvent{}
			}
			if p, ok := latest[ev.id][ev.tp]; !ok || ev.off > p.off {
				latest[ev.id][ev.tp] = ev
			}
		}
		for id, per := range latest {
			var vs []mapping.KeyRecord
			var es []foldEvent
			for _, ev := range per {
				vs = append(vs, mapping.KeyRecord{Partition: ev.tp, Offset: ev.off, Timestamp: ev.ts})
				es = append(es, ev)
			}
			w := es[mapping.Winner(vs)]
			if w.op == "d" || w.op == "-" {
				delete(rows, id)
				removed[id] = foldRemoval{tp: w.tp, off: w.off}
			} else {
				rows[id] = w
				delete(removed, id)
			}
		}
	}
	return rows, removed
}

// TestDebeziumTruncateFoldModel (from a review): a random Debezium story over
// three partitions (creates, updates, deletes, tombstones and truncates,
// with --on-truncate delete-all), sunk in several bounded runs of small
// flushes, must leave the table the model of the sink's documented rule
// folds from the ledger's commits; the content audit must call it
// complete; and floe where --key --brokers must answer each key's status
// as the model does (a row at the model's position, or deleted), before
// and after floe maintain --compact. Which record it names as a deleted
// key's delete is not checked here: TestWhereKeyOldTruncateAfterCompaction
// pins the wrong one this test found (seed 1, key 6, after the
// compaction, since fixed); a redundant delete in a truncate's commit, after the key's
// row went, is named by an earlier delete of the key (cosmetic).
func TestDebeziumTruncateFoldModel(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if s := os.Getenv("FLOE_FOLD_SEED"); s != "" {
		n, _ := strconv.ParseUint(s, 10, 64)
		seeds = []uint64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testTruncateFold(t, seed) })
	}
}

func testTruncateFold(t *testing.T, seed uint64) {
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(seed, 57))
	topic := fmt.Sprintf("dbserver1.inventory.fold_%d", seed)
	e.Topic(topic, 3, nil)
	tbl, dlq := e.debeziumTable(fmt.Sprintf("lake.fold_%d", seed), floetest.CDCPlainJSON)
	var evs []foldEvent
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	sec := 0
	for run := range 5 {
		var batch []*kgo.Record
		var meta []foldEvent
		for range 6 + rng.IntN(8) {
			p := int32(rng.IntN(3))
			id := 1 + rng.IntN(6)
			var op string
			switch x := rng.IntN(20); {
			case x < 1:
				op = "t"
			case x < 4:
				op = "d"
			case x < 5:
				op = "-"
			case x < 10:
				op = "c"
			default:
				op = "u"
			}
			// Record times jump around across partitions (the winner rule
			// across partitions is the later time).
			sec += 1 + rng.IntN(3)
			ts := base.Add(time.Duration(sec+rng.IntN(5)-2) * time.Second)
			mail := fmt.Sprintf("%d-%d@x", id, sec)
			var r *kgo.Record
			if op == "t" {
				r = dbzTruncate(topic, 0)
			} else {
				r = dbzEvent(topic, op, id, mail, 0)
			}
			r.Partition, r.Timestamp = p, ts
			batch = append(batch, r)
			meta = append(meta, foldEvent{op: op, id: id, ts: ts, mail: mail})
		}
		e.Produce(batch)
		for i, r := range batch {
			m := meta[i]
			m.tp, m.off = mapping.TopicPartition{Topic: topic, Partition: r.Partition}, r.Offset
			evs = append(evs, m)
		}
		cfg := connector.Config{Topic: topic, StopAtEnd: true, FlushRecords: 2 + rng.IntN(5), DeadLetters: dlq, OnTruncate: connector.TruncateDeleteAll}
		if _, err := e.sink(tbl, cfg); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	for _, ev := range evs {
		t.Logf("event %s@%d %s id=%d ts=%s", ev.tp, ev.off, ev.op, ev.id, ev.ts.Format("15:04:05"))
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	l, err := tbl.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range l.Commits {
		t.Logf("commit %d: %v", c.SnapshotID, c.Ranges)
	}
	want, removed := foldModel(t, l.Commits, evs)
	check := func(when string) {
		got := map[int]row{}
		for _, r := range rows(t, tbl) {
			id, _ := strconv.Atoi(r.Columns["id"])
			if _, dup := got[id]; dup {
				t.Errorf("%s: key %d has two rows", when, id)
			}
			got[id] = r
		}
		for id := 1; id <= 6; id++ {
			w, ok := want[id]
			g, has := got[id]
			switch {
			case ok && !has:
				t.Errorf("%s: key %d: the table has no row, the model's is %s@%d", when, id, w.tp, w.off)
			case !ok && has:
				t.Errorf("%s: key %d: the table has the row of %s@%d, the model none", when, id, g.TP, g.Offset)
			case ok && (g.TP != w.tp || g.Offset != w.off):
				t.Errorf("%s: key %d: the table's row is of %s@%d, the model's of %s@%d", when, id, g.TP, g.Offset, w.tp, w.off)
			}
		}
		requireComplete(t, auditContent(t, e, tbl, nil), when)
		for id := 1; id <= 6; id++ {
			seen := slices.ContainsFunc(evs, func(ev foldEvent) bool { return ev.id == id && ev.op != "t" })
			if !seen {
				continue
			}
			r := searchWhere(t, e, tbl, fmt.Sprintf(`{"id":%d}`, id))
			if w, ok := want[id]; ok {
				if r.Status != lookup.KeyStatusRow || deref32(r.Partition) != any(w.tp.Partition) || deref64(r.Offset) != any(w.off) {
					t.Errorf("%s: where --key %d: %s at %v@%v; want the row of %s@%d", when, id, r.Status, deref32(r.Partition), deref64(r.Offset), w.tp, w.off)
				}
				continue
			}
			rm, ok := removed[id]
			if !ok {
				// Only tombstones: never a row.
				continue
			}
			switch {
			case r.Status == lookup.KeyStatusRow || r.Status == lookup.KeyStatusNeverSeen:
				t.Errorf("%s: where --key %d: %s; want deleted (%+v)", when, id, r.Status, rm)
			case r.Status != lookup.KeyStatusDeleted:
				t.Errorf("%s: where --key %d: %s; want deleted (%+v)", when, id, r.Status, rm)
			}
		}
	}
	check("after the sink")
	if _, err := tbl.Compact(e.Ctx, snapshot.CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tbl.Refresh(e.Ctx); err != nil {
		t.Fatal(err)
	}
	check("after the compaction")
}
