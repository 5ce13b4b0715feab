// Package fanout moves one encoded buffer from a publisher to many
// subscribers without copying it and without letting a slow subscriber slow
// anyone else.
//
// # What it owns
//
//   - [Pool] and [Buffer]: size-classed pools of encode-once, reference-counted
//     byte buffers. The broker encodes an event batch into a Buffer once,
//     takes one reference per subscriber, and the bytes go back to the pool
//     when the last subscriber releases them.
//   - [Queue]: a queue of Buffer references per subscriber, bounded in events
//     and in bytes, with a policy for when it is full: [DropNew] (the
//     default), [DropOld], the lossless [Block], or [CatchUp] for a consumer
//     that can read what it missed elsewhere (a durable log): the queue
//     empties and refuses pushes until the consumer calls Resume. Every
//     drop is counted so the broker can report a gap; a drop is never
//     silent.
//   - [Budget]: a bound on the memory a set of queues holds together, each
//     shared buffer counted once; over it, only queues above their fair
//     share are full.
//   - [Batcher]: the delivery batching decision (max events, max bytes, max
//     delay measured from the first buffered event) and the small driver that
//     applies it to a Queue.
//   - Slow-consumer isolation: under DropNew and DropOld a Push never waits,
//     so a stuck subscriber costs its own queue's drops and nothing else.
//
// # What it must not do
//
// It sits on floor 2 next to wire/ and must not import quic-go or wire: it
// knows nothing about frames. A Buffer is opaque bytes plus the metadata the
// broker fills in (event count and base offset). internal/lint's layering
// test enforces this.
//
// # Ownership and lifetimes
//
// A Buffer is returned by [Pool.Get] with one reference. [Buffer.Retain]
// adds one, [Buffer.Release] drops one; the bytes are recycled when the count
// reaches zero, so no slice obtained from a Buffer may be used after its
// holder's Release. [Queue.Push] always consumes exactly one reference from
// the caller, whether the buffer is queued, dropped or rejected; the buffers
// returned by [Queue.Next], [Queue.TryNext] and [Batcher.Next] carry one
// reference each that the caller must release after writing them.
//
// With -tags invariants, releasing too often, retaining or reading a
// released buffer, and writing to a released buffer panic, and released bytes
// are poisoned with 0xde. Without the tag the cheap underflow checks remain
// but detection is best effort, because released Buffer structs are reused.
//
// # Concurrency
//
// Pool, Buffer reference counting and Queue are safe for concurrent use. A
// Queue is designed for one publisher and one consumer but tolerates more of
// each. A Batcher belongs to one consumer goroutine. Each Queue has one
// mutex and no code path holds two, so there is no lock order to follow;
// statistics are typed atomics and never take a lock.
//
// # Platform support
//
// Portable Go; no build constraints other than the invariants tag.
package fanout
