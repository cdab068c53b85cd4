package connector

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// SetAllocator makes s build its rows with mem (a memory.CheckedAllocator
// in tests that look for leaked Arrow buffers).
func SetAllocator(s *Sink, mem memory.Allocator) { s.alloc = mem }

// SetSpillBytes sets the record bytes at which the rows of partitions
// without a stream of their own move to the flush's spill lane.
func SetSpillBytes(s *Sink, n int64) { s.spillBytes = n }

// SetReserveSchema makes s commit each flush's new columns ahead of its
// files (snapshot.Table.ReserveSchema), as it does once another writer's
// schema change moved a flush's files (ErrSchemaMoved).
func SetReserveSchema(s *Sink) { s.reserveSchema = true }

// SetLookForFilesAfter sets snapshot.CommitOptions.LookForFilesAfter of
// s's commits (negative: every flush looks for its files).
func SetLookForFilesAfter(s *Sink, d time.Duration) { s.lookForFilesAfter = d }
