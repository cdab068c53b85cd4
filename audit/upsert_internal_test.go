package audit

import (
	"encoding/binary"
	"hash/maphash"
	"runtime"
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// BenchmarkUpsertFold measures the memory of the content level's fold of an
// upsert table: one entry per distinct key (upsertWinner, keyed by its
// 16-byte keyID), built as the audit builds it: one partition's latest
// records, merged into the table-wide fold. It reports the heap both maps
// hold at their peak (the partition's fold is dropped after its merge) per
// key, for 100,000 keys.
func BenchmarkUpsertFold(b *testing.B) {
	const keys = 100_000
	tp := mapping.TopicPartition{Topic: "t", Partition: 0}
	ci := commitIndex{}
	ci.add(0, mapping.Commit{SnapshotID: 1, Ranges: []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: keys}, Records: keys}}})
	for b.Loop() {
		a := &auditor{keySeeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, tpIDs: map[mapping.TopicPartition]int32{}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := &upsertFold{winners: map[keyID]upsertWinner{}, others: map[keyID][]upsertWinner{}, dead: map[keyID]upsertWinner{}, commits: ci}
		fc := newFoldCheck(nil)
		var key [8]byte
		for i := range int64(keys) {
			binary.BigEndian.PutUint64(key[:], uint64(i))
			fc.observe(logRecord{offset: i, key: a.keyOf(key[:]), timestamp: i})
		}
		a.merge(f, tp, fc.latest, fc.dead, fc.truncates)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "B/key")
		runtime.KeepAlive(fc)
		runtime.KeepAlive(f)
	}
}

// TestAccounted: a range's ledger counts against what the log gives it.
// Floes before counted the tombstone after a Debezium delete as skipped;
// it deletes its key now. On a compacted topic the log may hold fewer of
// the records the sink read, never more.
func TestAccounted(t *testing.T) {
	r := [4]int64{3, 1, 1, 1} // records, deletes, skipped, dead letters
	for _, c := range []struct {
		got      [4]int64
		compacts bool
		want     bool
	}{
		{[4]int64{3, 1, 1, 1}, false, true},
		{[4]int64{3, 2, 0, 1}, false, true},  // the skipped tombstone deletes now
		{[4]int64{3, 0, 2, 1}, false, false}, // a delete the log skips
		{[4]int64{2, 1, 1, 1}, false, false}, // an upsert missing from the log
		{[4]int64{4, 1, 1, 1}, false, false},
		{[4]int64{2, 1, 0, 1}, true, true}, // two records compacted away
		{[4]int64{0, 0, 0, 0}, true, true},
		{[4]int64{4, 1, 1, 1}, true, false}, // more than the sink read
		{[4]int64{3, 1, 1, 2}, true, false},
	} {
		if got := accounted(c.got, r, c.compacts); got != c.want {
			t.Errorf("log counts %v (compacted topic %v) against the ledger's %v: accounted %v, want %v", c.got, c.compacts, r, got, c.want)
		}
	}
}
