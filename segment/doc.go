// Package segment is Felix's durable log: one log is one directory of
// segment files in storage format v3 (docs/storage-format.md), the format
// the published Rust Felix 0.6 writes, byte for byte. Format v3 adds the
// idempotent producer's marks to v2's records (AppendMarked, Batches); v2
// segments are still read, and a v2 active segment takes unmarked appends
// until the first marked batch rolls it. A record may also carry its
// publisher (the published v6) and event headers (version 0x8006, ours):
// AppendBatch rolls the active segment up to the version its batch needs.
//
// # What it owns, what it must not do
//
// It owns the segment files ({base_offset:020}.log, preallocated and mapped
// with github.com/edsrzf/mmap-go), record framing and checksums (CRC-32/IEEE),
// the sparse offset index ({base_offset:020}.index, a hint that is never
// trusted and rebuilt on any doubt), recovery (cut a torn tail, refuse
// silent corruption, naming file and byte), retention by size and age, and
// zero-copy reads. It must not decide when to fsync: it exposes Sync and
// Durable, and the commit sequencer (commit/, which this package never
// imports) calls them. It must not import the broker or any metrics
// library: Stats returns plain counters and histogram snapshots.
//
// # Durability
//
// Append makes nothing durable. Sync makes everything appended before it
// durable and advances Durable. Rolls (at SegmentBytes) seal the old segment
// durably: write back its data, truncate the file to its contents, fsync,
// write and fsync its index; then create the next segment (header written
// and fsynced) and fsync the directory. A failed Sync, seal or roll is
// terminal: the failure is recorded before the call returns, and every
// later Append and Sync fails with an error wrapping ErrLogFailed and the
// cause, so nothing is ever reported durable that was not. The exception is
// a roll that finds no space for the next segment (ErrNoSpace): nothing was
// written, and the next Append tries again, so a full disk is survivable.
//
// # Write modes, measured
//
// WriteModeFD (the default) writes each batch with one pwrite(2) from a
// staging buffer and Sync is fdatasync(2); WriteModeMapped builds the batch
// directly in the shared mapping and Sync is msync(MS_SYNC) of the dirty
// range, which Linux runs as vfs_fsync_range(..., datasync=1) over that
// range (mm/msync.c). Reads come from the mapping in both modes (the
// mapping and pwrite share the page cache).
//
// On the development VM (ext4 on virtio, 2 vCPUs shared with other jobs —
// noisy), BenchmarkAppendSync (Append then Sync, no group commit) measured
// fd 1.5–3.9× faster in all four shapes (e.g. 4 KiB × 16: 0.42 ms vs
// 1.5–1.6 ms per append+sync; 128 B × 1: 0.34 ms vs 0.51 ms), and
// BenchmarkAppend without sync measured fd faster for 4 KiB records and for
// batches (128 B × 16: ~2.0 M vs ~1.3 M records/s; 4 KiB × 16: ~130 k vs
// ~60 k records/s); mapped wins only single small records without sync
// (128 B × 1: ~1.3 M vs ~0.35 M records/s, no syscall). The likely reason,
// not separately profiled in the kernel: every first store to a page of the
// preallocated (unwritten) mapping takes a write fault and ext4's
// page_mkwrite, and after each msync writeback the page is write-protected
// again, so the next append faults again; pwrite does the same page-cache
// work inside one system call with no faults. Durable logs sync, and the
// broker batches, so fd is the default.
//
// # Reads and lifetimes
//
// Reader.Next returns payloads that are slices of the mapping, valid until
// Reader.Close; Read's payload is valid only while its callback runs. Each
// segment is reference-counted: the log holds one reference while the
// segment is in its list, a Reader one for every segment it visited, and
// the mapping is unmapped (and the file closed) on the last release. So
// retention and Close never unmap under a reader; a removed segment's file
// is unlinked at once and its memory lives until the reader closes. A
// payload used after its Reader closed points into unmapped memory and
// faults; under the invariants build tag a Reader used after Close panics
// and a reference released twice panics.
//
// Sealed segments are mapped on demand: with Config.MaxMappedSegments the
// least recently read ones that no reader holds are unmapped beyond the
// bound (their files are closed already), and mapped again, under the log
// lock, when a reader reaches them. A segment a reader holds is never
// unmapped: references rise from the log's own only under the log lock,
// where eviction looks.
//
// # Concurrency
//
// Append, Sync, NewReader/Read, EnforceRetention, Stats and Close may be
// called from any goroutines. Two locks: Log.syncMu serialises Sync, and
// Log.mu guards the segment list, the active segment's append state and the
// failure state; the order is syncMu before mu. Append holds mu for the copy
// of one batch. Sync holds mu only to snapshot the active segment and its
// written end, then writes back outside it (the bytes below the written end
// are complete and never change). Readers take mu only to find a segment;
// they read below the segment's written end, an atomic published after the
// bytes. A Reader itself is not safe for concurrent use.
//
// # Retention
//
// EnforceRetention removes whole sealed segments from the head, never the
// active one, while the log exceeds RetentionBytes or the oldest segment's
// newest event (its creation, if it holds none) is older than RetentionAge;
// generation records carry no time and do not count. It is off the append
// path: the caller (the broker) runs it on a timer.
//
// # Platforms
//
// Linux is the supported platform: fallocate(2), fdatasync(2), msync(2),
// madvise(2) and SEEK_DATA/SEEK_HOLE through the internal/linux shim. On
// file systems without fallocate (tmpfs on old kernels) segments are
// extended with Truncate instead (sparse: a full disk then surfaces as
// SIGBUS on a mapped store, so keep mapped mode off such file systems).
// Elsewhere the shim's fallbacks apply (Truncate, flush + fsync); darwin and
// windows build and vet but are not tuned or crash-tested.
package segment
