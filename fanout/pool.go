package fanout

import (
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/felixmq/felix/internal/invariants"
)

const (
	// minClassShift and maxClassShift bound the pooled size classes: powers
	// of two from 4 KiB (a small event batch) to 16 MiB (the largest batch
	// the broker encodes). Anything larger is rare enough to allocate
	// directly and leave to the garbage collector.
	minClassShift = 12
	maxClassShift = 24
	numClasses    = maxClassShift - minClassShift + 1

	// MinBufferSize is the capacity of the smallest pooled buffer.
	MinBufferSize = 1 << minClassShift
	// MaxPooledSize is the capacity of the largest pooled buffer; Get for a
	// larger size allocates exactly that size and never recycles it.
	MaxPooledSize = 1 << maxClassShift

	// unpooled marks a Buffer allocated outside the size classes.
	unpooled = -1

	// poisonByte fills released buffers under the invariants tag so a reader
	// holding a stale slice sees obvious garbage instead of plausible data.
	poisonByte = 0xde
)

// Pool hands out reference-counted Buffers from power-of-two size classes.
// The zero value is ready to use; a Pool must not be copied after first use.
//
// Each class is a sync.Pool of *Buffer so a steady Get/Release cycle
// allocates nothing. The counters are typed atomics so a metrics scrape (or a
// soak test checking that everything came back) never contends with the data
// path.
type Pool struct {
	classes [numClasses]sync.Pool

	gets        atomic.Uint64
	allocs      atomic.Uint64
	outstanding atomic.Int64
	outBytes    atomic.Int64
}

// PoolStats is a snapshot of a Pool's counters. Each field is exact; fields
// read together are not one atomic snapshot while buffers are in flight.
type PoolStats struct {
	// Gets counts calls to Get.
	Gets uint64 `json:"gets"`
	// Allocs counts Gets that allocated new memory (pool miss or a size
	// above MaxPooledSize).
	Allocs uint64 `json:"allocs"`
	// BuffersOutstanding is Gets minus final Releases: buffers somebody
	// still holds. It returns to zero when the broker is idle.
	BuffersOutstanding int64 `json:"buffers_outstanding"`
	// BytesOutstanding is the capacity of the outstanding buffers (the size
	// class, not the requested size): the memory they pin.
	BytesOutstanding int64 `json:"bytes_outstanding"`
}

// Stats returns the pool's counters without taking a lock.
func (p *Pool) Stats() PoolStats {
	return PoolStats{
		Gets:               p.gets.Load(),
		Allocs:             p.allocs.Load(),
		BuffersOutstanding: p.outstanding.Load(),
		BytesOutstanding:   p.outBytes.Load(),
	}
}

// classFor returns the size class that holds size bytes, or unpooled.
func classFor(size int) int {
	if size <= MinBufferSize {
		return 0
	}
	if size > MaxPooledSize {
		return unpooled
	}
	return bits.Len(uint(size-1)) - minClassShift
}

// classSize is the capacity of every buffer in class c.
func classSize(c int) int { return 1 << (c + minClassShift) }

// Get returns a Buffer holding one reference, with B of length 0 and
// capacity at least size (rounded up to the size class), and Events and
// BaseOffset zero. A negative size is treated as zero.
//
// Lifetime: B belongs to the Buffer. It is valid until the last reference is
// released; after that the memory is reused by another Get.
func (p *Pool) Get(size int) *Buffer {
	p.gets.Add(1)
	c := classFor(size)
	var b *Buffer
	if c == unpooled {
		b = &Buffer{B: make([]byte, 0, size), pool: p, class: unpooled}
		p.allocs.Add(1)
	} else if v := p.classes[c].Get(); v != nil {
		b = v.(*Buffer)
		if invariants.Enabled {
			checkPoison(b.B[:cap(b.B)])
		}
	} else {
		b = &Buffer{B: make([]byte, 0, classSize(c)), pool: p, class: int8(c)}
		p.allocs.Add(1)
	}
	b.refs.Store(1)
	p.outstanding.Add(1)
	p.outBytes.Add(int64(cap(b.B)))
	b.capacity = cap(b.B)
	return b
}

// put recycles b after its last reference is gone.
func (p *Pool) put(b *Buffer) {
	p.outstanding.Add(-1)
	p.outBytes.Add(-int64(b.capacity))
	c := int(b.class)
	// A buffer the broker grew past its class by appending no longer has the
	// class's capacity; dropping it keeps every pooled buffer exactly
	// class-sized, which Get's capacity promise relies on.
	if c == unpooled || cap(b.B) != classSize(c) {
		b.B = nil
		return
	}
	if invariants.Enabled {
		// Poison the bytes and retire the struct: a stale *Buffer keeps
		// refs == 0 forever, so any later Retain, Release or Bytes on it
		// panics instead of silently touching a recycled buffer.
		full := b.B[:cap(b.B)]
		for i := range full {
			full[i] = poisonByte
		}
		fresh := &Buffer{B: full[:0], pool: p, class: b.class}
		b.B = nil
		b = fresh
	}
	b.B = b.B[:0]
	b.Events = 0
	b.BaseOffset = 0
	b.Stamp, b.Extra = 0, nil
	p.classes[c].Put(b)
}

// checkPoison panics if a pooled buffer was written after its release.
func checkPoison(full []byte) {
	for _, x := range full {
		if x != poisonByte {
			panic("fanout: buffer written after release")
		}
	}
}
