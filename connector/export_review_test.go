package connector

import "github.com/apache/arrow-go/v18/arrow/memory"

// SetAllocator makes s build its rows with mem (a memory.CheckedAllocator
// in tests that look for leaked Arrow buffers).
func SetAllocator(s *Sink, mem memory.Allocator) { s.alloc = mem }
