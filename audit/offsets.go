package audit

import (
	"maps"
	"math/bits"
	"slices"

	"github.com/floe-dev/floe/mapping"
)

// pageBits is the number of offsets one page of an offsetSet covers. Dense
// offsets cost one bit each; a page touched by a single offset costs 512
// bytes.
const (
	pageShift = 12
	pageBits  = 1 << pageShift
	pageWords = pageBits / 64
)

type page [pageWords]uint64

// offsetSet is a set of offsets of one partition: a bitset in pages, so
// that memory follows the offsets present, not their span.
type offsetSet struct {
	pages map[int64]*page
	// lastKey and last cache the most recent page: rows come in runs of
	// ascending offsets.
	lastKey int64
	last    *page
	keys    []int64 // sorted page keys, computed by sortedKeys
}

func newOffsetSet() *offsetSet { return &offsetSet{pages: map[int64]*page{}} }

// add inserts offset and reports whether it was already present.
func (s *offsetSet) add(offset int64) bool {
	key := offset >> pageShift
	p := s.last
	if p == nil || key != s.lastKey {
		p = s.pages[key]
		if p == nil {
			p = new(page)
			s.pages[key] = p
			s.keys = nil
		}
		s.lastKey, s.last = key, p
	}
	bit := uint64(offset & (pageBits - 1))
	w, m := &p[bit/64], uint64(1)<<(bit%64)
	if *w&m != 0 {
		return true
	}
	*w |= m
	return false
}

func (s *offsetSet) sortedKeys() []int64 {
	if s.keys == nil {
		s.keys = slices.Sorted(maps.Keys(s.pages))
	}
	return s.keys
}

// count returns how many offsets of iv the set holds.
func (s *offsetSet) count(iv mapping.Interval) int64 {
	if iv.Len() <= 0 {
		return 0
	}
	keys := s.sortedKeys()
	first, last := iv.Low>>pageShift, (iv.High-1)>>pageShift
	i, _ := slices.BinarySearch(keys, first)
	var n int64
	for ; i < len(keys) && keys[i] <= last; i++ {
		p := s.pages[keys[i]]
		base := keys[i] << pageShift
		lo, hi := max(iv.Low, base)-base, min(iv.High, base+pageBits)-base // bits [lo, hi) of the page
		for w := lo / 64; w*64 < hi; w++ {
			word := p[w]
			if start := w * 64; lo > start {
				word &^= (uint64(1) << (lo - start)) - 1
			}
			if end := w*64 + 64; hi < end {
				word &= (uint64(1) << (hi - w*64)) - 1
			}
			n += int64(bits.OnesCount64(word))
		}
	}
	return n
}

// intervals returns the set as sorted, merged intervals.
func (s *offsetSet) intervals() []mapping.Interval {
	var out []mapping.Interval
	for _, key := range s.sortedKeys() {
		p := s.pages[key]
		for w, word := range p {
			for word != 0 {
				b := bits.TrailingZeros64(word)
				word &= word - 1
				o := key<<pageShift + int64(w*64+b)
				if n := len(out); n > 0 && out[n-1].High == o {
					out[n-1].High++
				} else {
					out = append(out, mapping.Interval{Low: o, High: o + 1})
				}
			}
		}
	}
	return out
}
