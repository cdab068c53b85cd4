package mapping

import (
	"errors"
	"maps"
	"math/rand/v2"
	"testing"
)

// lookupLedger: partition 0 sunk from 0 in three commits with a recorded
// loss [100, 150); partition 1 sunk from 500 (replay from an offset).
func lookupLedger() Ledger {
	lost := Range{TopicPartition: tp("t", 0), Interval: Interval{100, 150}, Lost: true}
	return Ledger{Commits: []Commit{
		{SnapshotID: 1, ID: "a", Ranges: []Range{rng("t", 0, 0, 60, 58), rng("t", 1, 500, 520, 20)}},
		{SnapshotID: 2, ID: "b", Ranges: []Range{rng("t", 0, 60, 100, 40), lost, rng("t", 0, 150, 170, 20)}},
		{SnapshotID: 3, ID: "c", Ranges: []Range{rng("t", 1, 520, 600, 80)}},
	}}
}

func TestWhere(t *testing.T) {
	l := lookupLedger()
	for _, c := range []struct {
		tp     TopicPartition
		offset int64
		status Status
		snap   int64
		iv     Interval
	}{
		{tp("t", 0), 0, StatusCovered, 1, Interval{0, 60}},
		{tp("t", 0), 59, StatusCovered, 1, Interval{0, 60}},
		{tp("t", 0), 60, StatusCovered, 2, Interval{60, 100}},
		{tp("t", 0), 120, StatusLost, 2, Interval{100, 150}},
		{tp("t", 0), 170, StatusUnsunk, 0, Interval{}},
		{tp("t", 1), 499, StatusUnsunk, 0, Interval{}},
		{tp("t", 1), 599, StatusCovered, 3, Interval{520, 600}},
		{tp("t", 7), 0, StatusUnsunk, 0, Interval{}},
	} {
		loc := l.Where(c.tp, c.offset)
		if loc.Status != c.status || loc.Commit.SnapshotID != c.snap || loc.Range.Interval != c.iv {
			t.Errorf("Where(%s, %d) = %s snapshot %d range %s; want %s %d %s",
				c.tp, c.offset, loc.Status, loc.Commit.SnapshotID, loc.Range.Interval, c.status, c.snap, c.iv)
		}
	}
	if loc := l.Where(tp("t", 1), 10); !loc.Known || loc.First != 500 || loc.Next != 600 {
		t.Errorf("unsunk location carries coverage %v [%d, %d), want known [500, 600)", loc.Known, loc.First, loc.Next)
	}
	if loc := l.Where(tp("t", 7), 0); loc.Known {
		t.Errorf("partition the ledger never saw is known")
	}
}

func TestFirstCovering(t *testing.T) {
	l := lookupLedger()
	for _, c := range []struct {
		cut  Cut
		snap int64
	}{
		{Cut{tp("t", 0): 30}, 1},
		{Cut{tp("t", 0): 60}, 1},
		{Cut{tp("t", 0): 61}, 2},
		{Cut{tp("t", 0): 170}, 2},
		{Cut{tp("t", 0): 10, tp("t", 1): 521}, 3},
		// At or below the first sunk offset: covered from the first commit.
		{Cut{tp("t", 1): 400}, 1},
		{Cut{tp("t", 9): 0}, 1},
	} {
		got, err := l.FirstCovering(c.cut)
		if err != nil || got.SnapshotID != c.snap {
			t.Errorf("FirstCovering(%s) = %d, %v; want %d", c.cut, got.SnapshotID, err, c.snap)
		}
	}
	var nc *NotCoveredError
	if _, err := l.FirstCovering(Cut{tp("t", 0): 171}); !errors.As(err, &nc) || !nc.Known || nc.Next != 170 {
		t.Errorf("cut past the ledger: %v, want NotCoveredError with next 170", err)
	}
	if _, err := l.FirstCovering(Cut{tp("t", 9): 5}); !errors.As(err, &nc) || nc.Known {
		t.Errorf("cut on an unknown partition: %v, want NotCoveredError, not known", err)
	}
	if _, err := (Ledger{}).FirstCovering(Cut{tp("t", 0): 1}); err == nil {
		t.Errorf("empty ledger covers a cut")
	}
}

func TestParseCut(t *testing.T) {
	c, err := ParseCut("orders/0=10, pay.v2/3=0,1=7", "orders")
	if err != nil {
		t.Fatal(err)
	}
	want := Cut{tp("orders", 0): 10, tp("pay.v2", 3): 0, tp("orders", 1): 7}
	if c.String() != want.String() {
		t.Fatalf("got %s, want %s", c, want)
	}
	if !c.Below(tp("orders", 0), 9) || c.Below(tp("orders", 0), 10) || !c.Below(tp("other", 0), 1<<40) {
		t.Fatal("Below disagrees with the cut")
	}
	for _, bad := range []string{"", "orders/0", "0=1", "orders/x=1", "orders/0=-1", "orders/0=1,orders/0=2", "bad topic/0=1", "orders/-1=0"} {
		if _, err := ParseCut(bad, ""); err == nil {
			t.Errorf("ParseCut(%q) accepted", bad)
		}
	}
}

// TestStateAt places cuts on the commit boundaries of lookupLedger: a
// boundary is exact and gets FirstCovering's commit; a cut inside a range
// gets the boundary below it and names the commit that reaches past it.
func TestStateAt(t *testing.T) {
	l := lookupLedger()
	for _, c := range []struct {
		cut   string
		snap  int64 // 0: empty
		at    string
		exact bool
		next  int64
	}{
		{"t/0=60", 1, "t/0=60", true, 0},
		{"t/0=170", 2, "t/0=170", true, 0},
		{"t/0=80", 1, "t/0=60", false, 2},
		{"t/0=30", 0, "t/0=0", false, 1},
		{"t/0=0", 0, "t/0=0", true, 0},
		{"t/0=60,t/1=520", 1, "t/0=60,t/1=520", true, 0},
		{"t/0=170,t/1=550", 2, "t/0=170,t/1=520", false, 3},
		{"t/1=500", 0, "t/1=500", true, 0},
		{"t/1=600", 3, "t/1=600", true, 0},
	} {
		cut, err := ParseCut(c.cut, "")
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.StateAt(cut)
		if err != nil {
			t.Fatalf("%s: %v", c.cut, err)
		}
		var next int64
		if b.Next != nil {
			next = b.Next.SnapshotID
		}
		if b.Commit.SnapshotID != c.snap || b.Empty != (c.snap == 0) || b.At.String() != c.at || b.Exact(cut) != c.exact || next != c.next {
			t.Errorf("StateAt(%s) = snapshot %d empty %v at %s exact %v next %d; want %d %s %v %d",
				c.cut, b.Commit.SnapshotID, b.Empty, b.At, b.Exact(cut), next, c.snap, c.at, c.exact, c.next)
		}
	}
	var nc *NotCoveredError
	if _, err := l.StateAt(Cut{tp("t", 0): 171}); !errors.As(err, &nc) {
		t.Fatalf("past the ledger: %v", err)
	}
}

// TestStateAtRandom checks StateAt, which reads the commits once, against
// the definition read twice over the whole ledger: the longest prefix not
// past the cut, and of it the first commit at which the cut's partitions
// stood where they stand at its end.
func TestStateAtRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var l Ledger
		next := map[int32]int64{0: int64(rnd.IntN(5)), 1: 0, 2: 0}
		for i := range 1 + rnd.IntN(8) {
			c := Commit{SnapshotID: int64(i + 1)}
			for p := range int32(3) {
				if rnd.IntN(2) == 0 {
					continue
				}
				n := int64(rnd.IntN(4))
				c.Ranges = append(c.Ranges, rng("t", p, next[p], next[p]+n, n))
				next[p] += n
			}
			l.Commits = append(l.Commits, c)
		}
		cut := Cut{}
		for p := range int32(3) {
			if rnd.IntN(3) > 0 && next[p] > 0 {
				cut[tp("t", p)] = int64(rnd.IntN(int(next[p]) + 1))
			}
		}
		want, wantErr := stateAtTwoPasses(l, cut)
		got, err := l.StateAt(cut)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%v cut %s: error %v, want %v", l, cut, err, wantErr)
		}
		if err != nil {
			continue
		}
		var gotNext, wantNext int64
		if got.Next != nil {
			gotNext = got.Next.SnapshotID
		}
		if want.Next != nil {
			wantNext = want.Next.SnapshotID
		}
		if got.Commit.SnapshotID != want.Commit.SnapshotID || got.Empty != want.Empty || got.At.String() != want.At.String() || gotNext != wantNext {
			t.Fatalf("%v cut %s: got commit %d empty %v at %s next %d; want %d %v %s %d", l.Commits, cut,
				got.Commit.SnapshotID, got.Empty, got.At, gotNext, want.Commit.SnapshotID, want.Empty, want.At, wantNext)
		}
	}
}

// stateAtTwoPasses is StateAt as its definition reads.
func stateAtTwoPasses(l Ledger, cut Cut) (Boundary, error) {
	base, err := baseOf(l.Summarize(), cut)
	if err != nil {
		return Boundary{}, err
	}
	at, last := maps.Clone(base), -1
	for i, c := range l.Commits {
		if reachesPast(c, cut) {
			break
		}
		last = i
		for _, r := range c.Ranges {
			if _, named := cut[r.TopicPartition]; named && r.Len() > 0 {
				at[r.TopicPartition] = max(at[r.TopicPartition], r.High)
			}
		}
	}
	b := Boundary{At: at, Empty: last < 0}
	if last+1 < len(l.Commits) && !b.Exact(cut) {
		b.Next = &l.Commits[last+1]
	}
	if b.Empty {
		return b, nil
	}
	next := maps.Clone(base)
	for i := 0; i <= last; i++ {
		for _, r := range l.Commits[i].Ranges {
			if _, named := cut[r.TopicPartition]; named && r.Len() > 0 {
				next[r.TopicPartition] = max(next[r.TopicPartition], r.High)
			}
		}
		if reaches(next, at) {
			b.Commit = l.Commits[i]
			return b, nil
		}
	}
	b.Commit = l.Commits[last]
	return b, nil
}
