package snapshot_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/floe-dev/floe/mapping"
	"github.com/floe-dev/floe/snapshot"
)

// TestStateAtThroughMaintainedArchive: an upsert table committed through
// the normal path, archived round by round by Maintain (expiry), answers
// Table.StateAt as its whole ledger's StateAt does, on the writer's handle
// and on a fresh one, for cuts of one to three partitions at and between
// commit boundaries.
func TestStateAtThroughMaintainedArchive(t *testing.T) {
	cat := tempCatalog(t)
	tbl := openTestTable(t, cat, "lake.stateat", snapshot.OpenOptions{Create: true, Mode: mapping.ModeUpsert})
	rnd := rand.New(rand.NewPCG(3, 9))
	next := map[int32]int64{}
	for round := range 8 {
		for range 3 + rnd.IntN(5) {
			bounds := map[int32]mapping.Interval{}
			var recs []testRec
			for p := range int32(3) {
				if rnd.IntN(3) == 0 {
					continue
				}
				n := int64(1 + rnd.IntN(3))
				bounds[p] = mapping.Interval{Low: next[p], High: next[p] + n}
				for o := next[p]; o < next[p]+n; o++ {
					recs = append(recs, testRec{p, o, fmt.Sprintf("k%d", rnd.IntN(4)), fmt.Sprintf("v%d", o), 0})
				}
				next[p] += n
			}
			if len(bounds) == 0 {
				bounds[0] = mapping.Interval{Low: next[0], High: next[0] + 1}
				recs = append(recs, testRec{0, next[0], "k0", "v", 0})
				next[0]++
			}
			commitRecs(t, tbl, bounds, recs...)
		}
		if _, err := tbl.Maintain(t.Context(), snapshot.MaintainOptions{Expire: true, RetainLast: 1 + rnd.IntN(3)}); err != nil {
			t.Fatal(err)
		}
		fresh := openTestTable(t, cat, "lake.stateat", snapshot.OpenOptions{})
		whole, err := fresh.Ledger()
		if err != nil {
			t.Fatal(err)
		}
		for range 60 {
			cut := mapping.Cut{}
			for p := range int32(3) {
				if rnd.IntN(2) == 0 && next[p] > 0 {
					cut[mapping.TopicPartition{Topic: "t", Partition: p}] = int64(rnd.IntN(int(next[p]) + 1))
				}
			}
			if len(cut) == 0 {
				cut[mapping.TopicPartition{Topic: "t", Partition: 0}] = int64(rnd.IntN(int(next[0]) + 1))
			}
			wb, werr := whole.StateAt(cut)
			for name, h := range map[string]*snapshot.Table{"writer": tbl, "fresh": fresh} {
				gb, gerr := h.StateAt(t.Context(), 0, cut)
				if (werr != nil) != (gerr != nil) {
					t.Fatalf("round %d %s cut %s: error %v, whole ledger %v", round, name, cut, gerr, werr)
				}
				if werr != nil {
					continue
				}
				gn, wn := int64(0), int64(0)
				if gb.Next != nil {
					gn = gb.Next.SnapshotID
				}
				if wb.Next != nil {
					wn = wb.Next.SnapshotID
				}
				if gb.Commit.SnapshotID != wb.Commit.SnapshotID || gb.Empty != wb.Empty || gb.At.String() != wb.At.String() || gn != wn {
					t.Fatalf("round %d %s cut %s: commit %d empty %v at %s next %d; whole ledger %d %v %s %d", round, name, cut,
						gb.Commit.SnapshotID, gb.Empty, gb.At, gn, wb.Commit.SnapshotID, wb.Empty, wb.At, wn)
				}
			}
		}
	}
}
