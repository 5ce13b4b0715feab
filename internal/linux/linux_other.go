//go:build !linux

package linux

import (
	"fmt"
	"os"
)

// Msync flags and madvise advice. The values are placeholders with the Linux
// numbering: the calls that take them are stubs here.
const (
	MS_SYNC  = 4
	MS_ASYNC = 1

	MADV_NORMAL     = 0
	MADV_RANDOM     = 1
	MADV_SEQUENTIAL = 2
	MADV_WILLNEED   = 3
	MADV_DONTNEED   = 4

	FALLOC_FL_KEEP_SIZE = 1
)

// Supported reports whether the calls of this package are real on this
// platform (false here: every call is a fallback).
const Supported = false

// Fallocate is not available: callers extend the file with Truncate instead.
func Fallocate(fd uintptr, mode uint32, off, length int64) error {
	return fmt.Errorf("%w: fallocate", ErrNotSupported)
}

// Msync is not available: callers flush the mapping portably and then call
// (*os.File).Sync.
func Msync(b []byte, flags int) error {
	return fmt.Errorf("%w: msync", ErrNotSupported)
}

// Fdatasync is not available: callers use (*os.File).Sync.
func Fdatasync(fd uintptr) error {
	return fmt.Errorf("%w: fdatasync", ErrNotSupported)
}

// Madvise is advice only, so the fallback is a no-op that succeeds.
func Madvise(b []byte, advice int) error { return nil }

// SeekData is not available: callers treat the whole file as data.
func SeekData(fd uintptr, off int64) (pos int64, ok bool, err error) {
	return 0, false, fmt.Errorf("%w: lseek SEEK_DATA", ErrNotSupported)
}

// SeekHole is not available: callers treat the whole file as data.
func SeekHole(fd uintptr, off int64) (pos int64, ok bool, err error) {
	return 0, false, fmt.Errorf("%w: lseek SEEK_HOLE", ErrNotSupported)
}

// FreeBytes is not available: callers skip their free-space check.
func FreeBytes(path string) (int64, error) {
	return 0, fmt.Errorf("%w: statfs", ErrNotSupported)
}

// FileOwner is not known here: callers skip their ownership check.
func FileOwner(fi os.FileInfo) (uid int, ok bool) { return 0, false }

// TryLock cannot lock here: it reports the lock taken, so callers work as
// if alone (a second process is not detected on this platform).
func TryLock(fd uintptr) (bool, error) { return true, nil }
