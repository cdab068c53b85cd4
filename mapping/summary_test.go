package mapping

import (
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// randomLedger returns a ledger of commits over three partitions of two
// topics whose ranges mostly follow each other and sometimes jump ahead
// (gaps), step back (overlaps), record losses and aborted offsets, starts
// and dead letters, with topic IDs that change once.
func randomLedger(r *rand.Rand, commits int) Ledger {
	parts := []TopicPartition{tp("a", 0), tp("a", 1), tp("b", 0)}
	next := map[TopicPartition]int64{}
	var l Ledger
	for i := range commits {
		c := Commit{SnapshotID: int64(i + 1), CommittedAt: time.UnixMilli(int64(1000 + i)).UTC(), ID: "c", TopicIDs: map[string]string{}}
		for _, p := range parts {
			if r.IntN(4) == 0 {
				continue
			}
			lo := next[p]
			switch r.IntN(10) {
			case 0:
				lo += int64(r.IntN(5)) // a gap
			case 1:
				lo = max(0, lo-int64(r.IntN(8))) // an overlap
			}
			n := int64(r.IntN(6))
			rg := Range{TopicPartition: p, Interval: Interval{lo, lo + n}}
			switch k := r.IntN(10); {
			case n == 0:
			case k == 0:
				rg.Lost = true
			case k == 1:
				rg.Aborted = true
			default:
				rg.Records = int64(r.IntN(int(n) + 1))
				rg.DeadLetters = int64(r.IntN(int(n-rg.Records) + 1))
				// An upsert table's counts too (Coverer.Coverage dropped
				// them).
				rg.Deletes = int64(r.IntN(int(n-rg.Records-rg.DeadLetters) + 1))
				rg.Skipped = int64(r.IntN(int(n-rg.Records-rg.DeadLetters-rg.Deletes) + 1))
			}
			next[p] = max(next[p], rg.High)
			c.Ranges = append(c.Ranges, rg)
		}
		if len(c.Ranges) == 0 {
			continue
		}
		if r.IntN(3) == 0 {
			c.TopicIDs["a"] = []string{"idA", "idB"}[min(1, i*2/commits)]
		}
		l.Commits = append(l.Commits, c)
	}
	return l
}

// TestCovererMatchesCover checks the streamed coverage against Cover on
// gapped, overlapping and lossy ranges, given in commit order and shuffled.
func TestCovererMatchesCover(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 7))
		l := randomLedger(r, 1+r.IntN(40))
		for _, p := range l.Partitions() {
			rs := l.Ranges(p)
			want := Cover(rs)
			for _, order := range [][]Range{rs, shuffled(r, rs)} {
				var cv Coverer
				for _, rg := range order {
					cv.Add(rg)
				}
				got := cv.Coverage()
				if tiedLowest(rs) {
					// Cover's answer depends on how its sort orders
					// equal ranges.
					got.Started = want.Started
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d, %s, ranges %v:\n got %+v\nwant %+v", seed, p, order, got, want)
				}
				if k, want := cv.Kept(), mergedOf(rs, func(r Range) bool { return !r.Deleted() }); !reflect.DeepEqual(k, want) {
					t.Fatalf("seed %d, %s, ranges %v: Kept %v, want %v", seed, p, order, k, want)
				}
				if d, want := cv.WithDeadLetters(), mergedOf(rs, func(r Range) bool { return r.DeadLetters > 0 }); !reflect.DeepEqual(d, want) {
					t.Fatalf("seed %d, %s, ranges %v: WithDeadLetters %v, want %v", seed, p, order, d, want)
				}
			}
		}
	}
}

// mergedOf returns the offsets the non-empty ranges of rs that keep
// cover, merged and sorted, computed offset by offset.
func mergedOf(rs []Range, keep func(Range) bool) []Interval {
	in := map[int64]bool{}
	for _, r := range rs {
		if keep(r) {
			for o := r.Low; o < r.High; o++ {
				in[o] = true
			}
		}
	}
	var out []Interval
	for _, o := range slices.Sorted(maps.Keys(in)) {
		if n := len(out); n > 0 && out[n-1].High == o {
			out[n-1].High++
			continue
		}
		out = append(out, Interval{o, o + 1})
	}
	return out
}

// tiedLowest reports whether the lowest range (by Low, then High) of rs
// is not the only one.
func tiedLowest(rs []Range) bool {
	s := slices.Clone(rs)
	SortRanges(s)
	return len(s) > 1 && s[0].Interval == s[1].Interval
}

func shuffled(r *rand.Rand, rs []Range) []Range {
	out := slices.Clone(rs)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestSummaryMatchesLedger checks that a summary, folded commit by commit
// or merged from the summaries of consecutive pieces of the ledger, answers
// as the ledger does.
func TestSummaryMatchesLedger(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 11))
		l := randomLedger(r, 1+r.IntN(40))
		whole := l.Summarize()
		var merged Summary
		for rest := l.Commits; len(rest) > 0; {
			n := 1 + r.IntN(len(rest))
			merged.Merge(Ledger{Commits: rest[:n]}.Summarize())
			rest = rest[n:]
		}
		for name, s := range map[string]Summary{"folded": whole, "merged": merged} {
			if s.Commits != len(l.Commits) || !reflect.DeepEqual(s.Next(), l.Next()) ||
				!reflect.DeepEqual(s.Partitions(), l.Partitions()) || !reflect.DeepEqual(s.Topics(), l.Topics()) {
				t.Fatalf("seed %d, %s: commits %d next %v partitions %v, ledger %d %v %v", seed, name, s.Commits, s.Next(), s.Partitions(), len(l.Commits), l.Next(), l.Partitions())
			}
			for _, topic := range []string{"a", "b"} {
				if s.TopicID(topic) != l.TopicID(topic) || !slices.Equal(s.TopicIDs(topic), l.TopicIDs(topic)) {
					t.Fatalf("seed %d, %s: topic %s ids %q %v, ledger %q %v", seed, name, topic, s.TopicID(topic), s.TopicIDs(topic), l.TopicID(topic), l.TopicIDs(topic))
				}
			}
			for _, p := range l.Partitions() {
				c := Cover(l.Ranges(p))
				ps, _ := s.Partition(p)
				if ps.First() != c.First || ps.Next() != c.Next || ps.Ranges != c.Ranges || ps.Records != c.Records ||
					ps.DeadLetters != c.DeadLetters || (ps.Started != c.Started && !tiedLowest(l.Ranges(p))) {
					t.Fatalf("seed %d, %s, %s: summary %+v, coverage %+v", seed, name, p, ps, c)
				}
			}
		}
	}
}
