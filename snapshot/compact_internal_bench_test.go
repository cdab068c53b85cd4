package snapshot

import (
	"testing"

	"github.com/floe-dev/floe/mapping"
)

// BenchmarkPlanSpreadLanes plans the merge (mergedPieces) of 200 lanes of
// a 1,000-partition topic, each spanning every partition and spread over
// Iceberg partitions: a day of a busy wide topic's lanes in one bin.
// Checking each piece's spans against every span of the cut took 37 s
// (found by review); against the cut's offsets per partition, a fraction
// of a second.
//
//	go test ./snapshot/ -run '^$' -bench PlanSpreadLanes -benchtime 1x
func BenchmarkPlanSpreadLanes(b *testing.B) {
	const lanes, parts = 200, 1000
	var pieces []compactPiece
	for l := range lanes {
		p := compactPiece{bin: spreadBin, size: 1 << 20, rows: 1000, files: make([]compactFile, 16)}
		for q := range parts {
			p.spans = append(p.spans, mapping.Span{TopicPartition: mapping.TopicPartition{Topic: "t", Partition: int32(q)},
				Interval: mapping.Interval{Low: int64(l), High: int64(l + 1)}})
		}
		pieces = append(pieces, p)
	}
	for b.Loop() {
		if merged := mergedPieces(pieces, 512<<20); len(merged) != 1 || len(merged[0]) != lanes {
			b.Fatalf("%d cuts, want one of every lane", len(merged))
		}
	}
}
