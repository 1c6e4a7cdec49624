package kafka

import "sync"

// Large response frames (fetch answers) are taken from pools by size
// class and given back once written: a fresh frame of a few MiB costs as
// much to zero as to fill, and a busy consumer asks for one every few
// milliseconds. Small frames are left to the allocator.
const (
	minPooledFrame = 64 << 10
	maxPooledFrame = 32 << 20
)

// framePools holds frames of capacity 64 KiB << i.
var framePools [10]sync.Pool

// frameClass is the pool whose frames hold at least n bytes (-1: none).
func frameClass(n int) int {
	for i := range framePools {
		if minPooledFrame<<i >= n {
			return i
		}
	}
	return -1
}

// getFrame returns an empty frame buffer of capacity at least n.
func getFrame(n int) []byte {
	if n < minPooledFrame || n > maxPooledFrame {
		return make([]byte, 0, n)
	}
	i := frameClass(n)
	if b, ok := framePools[i].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, minPooledFrame<<i)
}

// putFrame gives a written frame back, to the class its capacity fills.
func putFrame(b []byte) {
	c := cap(b)
	if c < minPooledFrame || c > maxPooledFrame {
		return
	}
	i := frameClass(c)
	if minPooledFrame<<i > c {
		i-- // a frame that grew past its class goes one class down
	}
	if i >= 0 {
		b = b[:0]
		framePools[i].Put(&b)
	}
}
