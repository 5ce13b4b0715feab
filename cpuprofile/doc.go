// Package cpuprofile tells where a process's CPU goes, per OS thread, and
// how much of the machine's time is spent outside any process: in softirqs,
// waiting on the disk, or stolen by the hypervisor.
//
// # Why
//
// A broker that tops out below the network or disk budget is short of CPU
// somewhere, and pprof only sees Go code. The questions this package answers
// are the ones pprof cannot:
//
//   - Which OS thread is hot? ioruntime names its threads felix-io-N, so one
//     saturated I/O thread stands out from the Go runtime's others
//     (Threads, Sampler).
//   - Is the time in user space or in the kernel (system), and how much of
//     the machine goes to softirq (packet receive and transmit, run on
//     whichever CPU took the interrupt and charged to no process), iowait
//     or steal (System, Sampler)?
//   - Which softirq, on which CPU, and how slow is the disk under fdatasync
//     (the optional eBPF Probes: time per softirq vector per CPU, and a log2
//     histogram of block request latency)?
//
// The broker serves a cumulative Snapshot in /debug/felix/stats (no state
// per scraper) and felixtrace turns two of them into rates with Delta; the
// JSON names of the exported result types are part of that interface.
//
// # What it must not do
//
// Be required to run the broker (docs/design.md, "Packages"): every function here is
// optional instrumentation, and every failure is an error to log once, never
// a reason to stop.
//
// # Degradation
//
// There are three levels, and the caller learns which it has from errors
// wrapping ErrNotSupported:
//
//  1. Linux, any user: /proc accounting. Threads reads /proc/PID/task/*/stat,
//     Process /proc/PID/stat, System /proc/stat; pure Go parsing, no
//     privileges. Counters tick in USER_HZ (10 ms), so rates are exact to a
//     tick per interval.
//  2. Linux on amd64 or arm64, root (or CAP_BPF and CAP_PERFMON), tracefs
//     mounted: OpenProbes adds the eBPF probes on the tracepoints
//     irq:softirq_entry/exit and block:block_rq_issue/complete. Without the
//     privilege, tracefs or the tracepoints it returns an error wrapping
//     ErrNotSupported whose message says which, and the caller keeps to
//     level 1. Another error means the probes themselves are wrong (a
//     verifier rejection, say) and is worth reporting as a bug.
//  3. Elsewhere: every function returns an error wrapping ErrNotSupported.
//
// On Linux, linking this package runs the init of cilium/ebpf's rlimit
// package, which probes for memory-cgroup accounting of BPF memory with one
// bpf(BPF_MAP_CREATE) call while RLIMIT_MEMLOCK is briefly zero. It is
// harmless without privileges (the call fails) and is the price of calling
// rlimit.RemoveMemlock for kernels older than 5.11.
//
// # Concurrency
//
// Threads, Process, System, TakeSnapshot and Delta hold no state. A Sampler
// belongs to one goroutine. Probes may be read from several goroutines and
// closed concurrently with reads.
//
// # Generated files
//
// softirq_bpfel.{go,o} and blockio_bpfel.{go,o} are built by bpf2go from
// bpf/*.bpf.c (gen.go) and committed, so that building Felix needs no C
// toolchain. `make generate` rebuilds them; `make generate-check` (part of
// `make test` when clang is installed) fails if they are stale.
package cpuprofile
