package broker

import "github.com/felixmq/felix/fanout"

// ring keeps the most recent encoded event buffers of a shard so that a
// subscriber can start a little in the past (replay on ephemeral streams).
// It holds one reference on each buffer; capacity counts events, and the
// newest buffer is always kept even when it alone exceeds the capacity.
// The shard lock guards it.
type ring struct {
	capacity int
	events   int
	bufs     []*fanout.Buffer // oldest first; a slice used as a deque
}

func (r *ring) push(b *fanout.Buffer) {
	if r.capacity <= 0 {
		return
	}
	b.Retain()
	r.bufs = append(r.bufs, b)
	r.events += b.Events
	for len(r.bufs) > 1 && r.events-r.bufs[0].Events >= r.capacity {
		r.events -= r.bufs[0].Events
		r.bufs[0].Release()
		r.bufs[0] = nil
		r.bufs = r.bufs[1:]
	}
	// Compact when the dead prefix dominates, so the deque does not grow.
	if cap(r.bufs) > 64 && len(r.bufs) < cap(r.bufs)/4 {
		r.bufs = append([]*fanout.Buffer(nil), r.bufs...)
	}
}

// first is the oldest offset held, or next when empty.
func (r *ring) first(next uint64) uint64 {
	if len(r.bufs) == 0 {
		return next
	}
	return r.bufs[0].BaseOffset
}

// from returns retained references to every buffer holding offsets ≥ off,
// oldest first. The caller releases them.
func (r *ring) from(off uint64) []*fanout.Buffer {
	var out []*fanout.Buffer
	for _, b := range r.bufs {
		if b.BaseOffset+uint64(b.Events) > off {
			b.Retain()
			out = append(out, b)
		}
	}
	return out
}

func (r *ring) clear() {
	for _, b := range r.bufs {
		b.Release()
	}
	r.bufs, r.events = nil, 0
}
