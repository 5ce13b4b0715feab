// Package linux is the one place in Felix that imports golang.org/x/sys/unix.
//
// It re-exports the handful of Linux system calls the storage code needs —
// fallocate(2), msync(2), fdatasync(2), madvise(2), lseek(2) SEEK_DATA/SEEK_HOLE — with signatures that are
// identical on every platform, so that callers hold no build-tagged code of
// their own. On Linux each function is the raw call. Elsewhere the fallback is
// honest (docs/design.md, "House style", platform code): it returns an
// error wrapping ErrNotSupported and the caller takes its portable path
// (Truncate instead of Fallocate, (*os.File).Sync instead of Msync or
// Fdatasync, a full scan instead of SeekData/SeekHole); Madvise, being
// only advice, is a no-op.
//
// Keeping raw syscalls behind this shim makes the platform surface of the
// project greppable in one directory, and internal/lint enforces it: no other
// package may import golang.org/x/sys/unix (or syscall).
//
// File descriptors are passed as uintptr, the type (*os.File).Fd returns on
// every platform.
package linux
