// Package ioruntime owns Felix's I/O threads: a fixed set of logical threads
// ("felix-io-0", "felix-io-1", ...) on which the udp package may run its
// socket read loops, pinned to OS threads.
//
// # What it owns, what it must not do
//
// It owns the thread set, CPU affinity (sched_setaffinity from a CPU list,
// FELIX_IO_PIN_CPUS), thread names (prctl PR_SET_NAME, visible in top -H,
// perf and /proc/self/task/*/comm), and the deterministic assignment of
// endpoints to threads by role (server, client, forwarder) and ordinal —
// never by creation history, so a restart puts the same endpoint on the same
// thread. It must not know about QUIC or frames (internal/lint forbids the
// quic-go import).
//
// # Which goroutines are pinned, and why
//
// Only the goroutines started with (*Thread).Go are pinned: in Felix those
// are the udp package's socket readers when FELIX_IO_RUNTIME_THREADS > 0.
// Each calls runtime.LockOSThread, names its OS thread after its logical
// thread, restricts it to the logical thread's CPU (when CPUs are given),
// runs the loop, and on exit restores the previous name and affinity and
// unlocks. If restoring fails the goroutine exits still locked, and the Go
// runtime then destroys the OS thread rather than reuse one with a stray
// affinity.
//
// Pinning exists for users with many cores who want the receive path of a
// socket isolated from application goroutines and on a known CPU (next to
// the NIC queue's interrupt). It is not the Linux default: on the 2-core
// machine this was built on, a locked goroutine parked in the netpoller
// costs a thread hand-off per wake-up, and a probe measured ~40% less
// throughput (docs/design.md, "Transport"). With Threads == 0
// (the default) there are no I/O threads at all: the udp conn does its
// recvmmsg inline on quic-go's own read goroutine.
//
// A logical thread may host more than one pinned goroutine (two endpoints
// assigned to it): each gets its own locked OS thread with the same name and
// CPU set. Multiplexing several sockets on one OS thread would need a
// private epoll loop next to Go's netpoller and raw non-blocking recvmmsg;
// that was rejected for now as more code than the measured benefit
// justifies.
//
// # Concurrency
//
// A Runtime is immutable after New except for its wait group; every method
// is safe for concurrent use. Whoever calls (*Thread).Go stops the loop it
// started (by making it return, e.g. by closing its socket); (*Runtime).Close
// waits for every such loop. There is one lock (the once-only warning).
//
// # Platforms
//
// Linux: everything above. Elsewhere LockOSThread only; a CPU list makes
// New fail with an error wrapping ErrNotSupported, and names are skipped.
package ioruntime
