// Package arrowmem provides the Arrow memory allocator a sink builds rows
// and encodes Parquet with: one that reuses large buffers.
package arrowmem

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Pool is a memory.Allocator that keeps freed buffers of 64 KiB to 256 MiB
// for reuse, by power-of-two size class. Arrow's builders and Parquet's
// encoders allocate buffers for every batch, page and column chunk and free
// them soon after; with Go's allocator each one is fresh memory that the
// runtime clears, faults in and collects again. The classes are sync.Pools,
// which the garbage collector empties of buffers left unused, so a Pool
// holds about what its users had in flight recently.
//
// A buffer is cleared when it is handed out again, because Arrow expects
// new memory to be zeroed (as Go's and the C allocator's is). Smaller
// buffers are plain Go allocations. Reallocate does not free the buffer it
// replaces: Arrow keeps slices of a builder's buffers (a value, a view)
// that a reuse would overwrite, and the garbage collector knows when they
// are gone.
//
// A reader of a buffer after its Free would read another batch's bytes:
// `go test -tags floe_poison` makes Free overwrite every buffer it keeps,
// and the tests that read rows back see any such read.
//
// The zero Pool is ready to use; a Pool must not be copied after first use.
type Pool struct {
	classes [maxClass - minClass + 1]sync.Pool
}

const (
	minClass  = 16 // 64 KiB
	maxClass  = 28 // 256 MiB
	alignment = 64 // Arrow's buffer alignment
)

var _ memory.Allocator = (*Pool)(nil)

// class is the power-of-two size class of a buffer of size bytes.
func class(size int) int {
	if size <= 1 {
		return 0
	}
	return bits.Len(uint(size - 1))
}

// Allocate returns a zeroed, 64-byte aligned buffer of size bytes.
func (p *Pool) Allocate(size int) []byte {
	c := class(size)
	if c < minClass || c > maxClass {
		return aligned(size)
	}
	if v, _ := p.classes[c-minClass].Get().(*[]byte); v != nil {
		b := *v
		clear(b[:cap(b)])
		return b[:size]
	}
	return aligned(1 << c)[:size]
}

// Reallocate returns a buffer of size bytes holding b's bytes: b itself
// when it has the room.
func (p *Pool) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	return nb
}

// Free keeps b for reuse when it is one of the Pool's buffers: a whole size
// class, aligned. The caller must not use b afterwards.
func (p *Pool) Free(b []byte) {
	n := cap(b)
	c := class(n)
	if n == 0 || n != 1<<c || c < minClass || c > maxClass || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment != 0 {
		return
	}
	b = b[:n]
	if poison {
		for i := range b {
			b[i] = 0xa5
		}
	}
	p.classes[c-minClass].Put(&b)
}

// aligned returns a zeroed buffer of size bytes whose start and capacity
// are Arrow's alignment apart from Go's allocation.
func aligned(size int) []byte {
	buf := make([]byte, size+alignment)
	shift := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(buf))) % alignment); r != 0 {
		shift = alignment - r
	}
	return buf[shift : shift+size : shift+size]
}
