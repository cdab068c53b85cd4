package snapshot

import (
	"math/rand/v2"
	"testing"
)

// TestParentOfRandomBlocks: whatever the segment's parents and its
// index file's block layout (gaps, overlaps, blocks out of order, counts
// past the end), parentOf after slim answers what the index file says
// for every entry a block covers, and nothing for those none covers.
func TestParentOfRandomBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		n := r.IntN(30)
		snaps := make([]ArchivedSnapshot, n)
		for i := range snaps {
			id := int64(r.IntN(20)) // duplicate ids and id 0 too
			snaps[i] = ArchivedSnapshot{SnapshotID: id, TimestampMs: int64(i)}
			switch r.IntN(5) {
			case 0:
			case 1, 2:
				if i > 0 {
					p := snaps[i-1].SnapshotID
					snaps[i].ParentID = &p
				}
			case 3:
				p := int64(0)
				snaps[i].ParentID = &p
			default:
				p := int64(r.IntN(25))
				snaps[i].ParentID = &p
			}
		}
		var blocks []indexBlock
		for k := r.IntN(5); k >= 0; k-- {
			first := r.IntN(n + 1)
			blocks = append(blocks, indexBlock{First: first, Count: r.IntN(n + 3)})
		}
		ix := &segmentIndex{Snapshots: append([]ArchivedSnapshot(nil), snaps...), Blocks: blocks}
		if err := ix.slim(); err != nil {
			t.Fatal(err)
		}
		covered := make([]bool, n)
		for _, b := range blocks {
			for i := b.First; i < b.First+b.Count && i < n; i++ {
				covered[i] = true
			}
		}
		for i, s := range snaps {
			p, ok := ix.parentOf(i)
			want := covered[i] && s.ParentID != nil
			if ok != want || ok && p != *s.ParentID {
				t.Fatalf("iter %d entry %d (covered %v): parent %d %v, want %v", iter, i, covered[i], p, ok, s.ParentID)
			}
		}
		if ix.building != nil {
			t.Fatalf("building left: %v", ix.building)
		}
	}
}
