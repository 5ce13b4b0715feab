// Package commit is Felix's group-commit sequencer: writers reserve the
// record ranges they appended to a log, one flusher goroutine makes them
// durable with as few syncs as possible, and a completer goroutine then runs
// each writer's callback strictly in reservation order.
//
// # What it owns
//
//   - [Sequencer]: one per log. [Sequencer.Reserve] stages a range after the
//     caller appended it (under its append lock, so reservations arrive in
//     disk order). In [OnCommit] mode the flusher takes every staged range,
//     calls [Syncer.Sync] once, and releases them all together; ranges staged
//     while a sync runs are covered by the next one, and before each sync
//     the flusher yields until the writers the previous sync released have
//     re-staged (or a yield brings none), so the number of waiters per sync
//     grows with concurrency without a timer; it stops yielding while recent
//     yields brought nobody back (writers a network round trip away), as
//     then they only delay the sync ([Config.MaxDelay] adds an
//     optional coalescing wait, off by default). [Periodic] (the default)
//     syncs every [Config.Interval] if anything was reserved, and [Never]
//     only on Flush and Close; in both, callbacks run without waiting for the
//     disk, still in order.
//   - The commit order: callbacks run on the completer goroutine, one at a
//     time, in reservation order, while the flusher goes on syncing (a
//     callback may wait for a Block subscriber's queue without stalling the
//     disk; up to four synced batches queue behind it). With
//     [Config.InlineCallbacks] (callbacks that never wait for long) the
//     flusher runs a batch itself while nothing is queued for the
//     completer: the acknowledgement leaves as soon as the sync returns. The broker does its post-commit half
//     (replay-ring append, fanout, ack) in them, so disk order = cursor order
//     = delivery order, as in the published Felix's commit sequencer.
//   - Terminal failure: the first failed Sync is recorded before any callback
//     can observe it; from then on every pending and future reservation
//     completes with an error wrapping [ErrSyncFailed] and the cause, no
//     sync is retried (after a failed fdatasync the kernel may have dropped
//     the dirty pages), and Flush, Close and Err report it (docs/design.md,
//     "Storage").
//   - [Stats]: syncs, sync errors, completed reservations and records, and
//     power-of-two [Histogram]s of records per sync, waiters per sync and
//     sync latency. The broker exports them; this package imports no metrics
//     library.
//
// # What it must not do
//
// From docs/design.md, "Floors": commit must not know about streams, and commit/
// and segment/ never import each other. It syncs whatever implements
// [Syncer]; the broker joins a segment.Log to a Sequencer. It performs no I/O
// of its own.
//
// # Concurrency
//
// All methods of Sequencer are safe for concurrent use; Reserve must be
// called in append order. The Sequencer owns one goroutine (pprof label
// goroutine=[GoroutineLabel]), started by [New] and stopped by
// [Sequencer.Close], which signals it, lets it make the final sync and
// complete every staged reservation, and waits for it to exit. Syncer.Sync is
// only ever called from that goroutine. Callbacks must not call Flush or
// Close. There is one mutex, guarding the staged reservations and the
// terminal error; it is never held across a Sync or a callback. Counters are
// typed atomics.
//
// # Platform support
//
// Portable Go. The fdatasync lives in the Syncer (segment/), not here.
package commit
