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
	l := mapping.Ledger{Commits: []mapping.Commit{{SnapshotID: 1, Ranges: []mapping.Range{{TopicPartition: tp, Interval: mapping.Interval{Low: 0, High: keys}, Records: keys}}}}}
	for b.Loop() {
		a := &auditor{keySeeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, tpIDs: map[mapping.TopicPartition]int32{}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := &upsertFold{winners: map[keyID]upsertWinner{}, commits: newCommitIndex(l)}
		fc := newFoldCheck(nil)
		var key [8]byte
		for i := range int64(keys) {
			binary.BigEndian.PutUint64(key[:], uint64(i))
			fc.observe(logRecord{offset: i, key: a.keyOf(key[:]), timestamp: i})
		}
		a.merge(f, tp, fc.latest)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/keys, "B/key")
		runtime.KeepAlive(fc)
		runtime.KeepAlive(f)
	}
}
