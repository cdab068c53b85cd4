package arrowmem

import (
	"testing"
	"unsafe"
)

func TestPoolReusesClearedBuffers(t *testing.T) {
	var p Pool
	for _, size := range []int{0, 1, 100, 64<<10 - 1, 64 << 10, 100_000, 3 << 20} {
		b := p.Allocate(size)
		if len(b) != size {
			t.Fatalf("Allocate(%d) gave %d bytes", size, len(b))
		}
		if size > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment != 0 {
			t.Fatalf("Allocate(%d) is not %d-byte aligned", size, alignment)
		}
		for i := range b[:cap(b)] {
			b[:cap(b)][i] = 0xff
		}
		p.Free(b)
		// The same class again: whether or not the pool kept the buffer
		// (a collection may empty it), it comes back cleared.
		c := p.Allocate(size)
		for i, v := range c[:cap(c)] {
			if v != 0 {
				t.Fatalf("Allocate(%d) after a Free: byte %d is %#x, not zero", size, i, v)
			}
		}
	}
}

func TestPoolReallocateKeepsBytes(t *testing.T) {
	var p Pool
	b := p.Allocate(70_000)
	for i := range b {
		b[i] = byte(i)
	}
	if c := p.Reallocate(100_000, b); &c[0] != &b[0] {
		t.Fatal("Reallocate within the capacity moved the buffer")
	}
	c := p.Reallocate(1<<20, b)
	for i := range b {
		if c[i] != byte(i) {
			t.Fatalf("Reallocate lost byte %d", i)
		}
	}
	for i := len(b); i < len(c); i++ {
		if c[i] != 0 {
			t.Fatalf("Reallocate's new byte %d is %#x, not zero", i, c[i])
		}
	}
}

func TestPoolIgnoresForeignBuffers(t *testing.T) {
	var p Pool
	p.Free(make([]byte, 100_000)) // not a whole class
	p.Free(nil)
	if b := p.Allocate(100_000); cap(b) != 1<<17 {
		t.Fatalf("Allocate(100000) has capacity %d, want the class's %d", cap(b), 1<<17)
	}
}
