package fanout

import (
	"sync/atomic"

	"github.com/felixmq/felix/internal/invariants"
)

// Buffer is an encode-once byte buffer shared by every subscriber of a
// stream. The broker encodes events into B once, sets Events and BaseOffset,
// takes one reference per subscriber queue and releases its own.
//
// Design: the reference count is the only synchronisation. The fields are
// written by the one goroutine that holds the sole reference (right after
// Get) and are read-only once the buffer is shared, so readers need no lock.
// Release of the last reference hands the struct back to the Pool; that is
// why no slice from a Buffer may outlive its holder's reference.
type Buffer struct {
	// B holds the encoded bytes. Append to it only while holding the sole
	// reference. Appending past cap(B) works but the grown array is not
	// recycled. Lifetime: valid until the holder's Release.
	B []byte
	// Events is the number of events encoded in B. Queue capacity and drop
	// accounting are counted in events, so it must be positive when pushed.
	Events int
	// BaseOffset is the offset of the first event in B.
	BaseOffset uint64
	// Stamp is a time the owner gives every event of B (the append time of
	// a durable stream's batch, Unix microseconds); 0 is none.
	Stamp int64
	// Extra is what the owner keeps with B besides its bytes (for the
	// broker: event headers and the publisher), nil for nothing. Like the
	// other fields it is set before the buffer is shared and read-only
	// after.
	Extra any

	refs     atomic.Int32
	held     atomic.Int32 // queues of a Budget holding it
	pool     *Pool
	capacity int  // cap(B) at Get, for the pool's byte counter
	class    int8 // size class, or unpooled
}

// Bytes returns B. Under the invariants tag it panics if the buffer was
// already released, which catches a use after release at the read.
//
// Lifetime: the slice is valid until the caller's reference is released.
func (b *Buffer) Bytes() []byte {
	if invariants.Enabled && b.refs.Load() <= 0 {
		panic("fanout: buffer used after release")
	}
	return b.B
}

// Retain adds a reference. The caller must already hold one: retaining a
// released buffer panics (always when detected; reliably under the
// invariants tag, where released structs are never reused).
func (b *Buffer) Retain() {
	if b.refs.Add(1) <= 1 {
		panic("fanout: buffer retained after release")
	}
}

// Release drops a reference; the last one returns the bytes to the pool.
// After Release the caller must not touch the Buffer or any slice from it.
// Releasing more times than retained panics (reliably under the invariants
// tag).
func (b *Buffer) Release() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		b.pool.put(b)
	case n < 0:
		panic("fanout: buffer released too many times")
	}
}

// Refs returns the current reference count, for tests and assertions. It is
// stale as soon as it returns if other holders exist.
func (b *Buffer) Refs() int { return int(b.refs.Load()) }

// ReleaseAll releases every buffer in bufs, clears the slots so the batch
// slice does not pin recycled buffers, and returns bufs[:0] for reuse.
func ReleaseAll(bufs []*Buffer) []*Buffer {
	for i, b := range bufs {
		b.Release()
		bufs[i] = nil
	}
	return bufs[:0]
}
