package snapshot

import (
	"sync"
	"weak"
)

// ArchiveCache shares the indexes of a table's ledger archive segments
// between the handles of the table in one process: a sink's and its
// scheduled compaction's, which opens a handle of its own at each run. A
// segment file is never rewritten, so its index, once read, holds for
// every handle that names it; without the cache each run read every
// segment's index again, a cost (and a transient heap) in proportion to
// the table's age.
//
// It holds an index only as long as a handle does (weak pointers): the
// segments that merges absorb leave it with the last table version that
// named them. It is safe for concurrent use. The zero value is ready.
type ArchiveCache struct {
	mu  sync.Mutex
	ixs map[string]weak.Pointer[segmentIndex]
}

// cacheKey keys an index by its table and segment.
func cacheKey(tableUUID, path string) string { return tableUUID + " " + path }

// get returns the index of the segment at path of the table, or nil.
func (c *ArchiveCache) get(tableUUID, path string) *segmentIndex {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ixs[cacheKey(tableUUID, path)].Value()
}

// put keeps ix as the index of the segment at path of the table, and
// forgets those no handle holds any more.
func (c *ArchiveCache) put(tableUUID, path string, ix *segmentIndex) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ixs == nil {
		c.ixs = map[string]weak.Pointer[segmentIndex]{}
	}
	for k, p := range c.ixs {
		if p.Value() == nil {
			delete(c.ixs, k)
		}
	}
	c.ixs[cacheKey(tableUUID, path)] = weak.Make(ix)
}
