//go:build linux

package linux

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
	"os"
	"syscall"
)

// Msync flags and madvise advice, re-exported from x/sys/unix.
const (
	MS_SYNC  = unix.MS_SYNC
	MS_ASYNC = unix.MS_ASYNC

	MADV_NORMAL     = unix.MADV_NORMAL
	MADV_SEQUENTIAL = unix.MADV_SEQUENTIAL
	MADV_RANDOM     = unix.MADV_RANDOM
	MADV_WILLNEED   = unix.MADV_WILLNEED
	MADV_DONTNEED   = unix.MADV_DONTNEED

	// FALLOC_FL_KEEP_SIZE preallocates without changing the file size.
	FALLOC_FL_KEEP_SIZE = unix.FALLOC_FL_KEEP_SIZE
)

// Supported reports whether the calls of this package are real on this
// platform (true on Linux).
const Supported = true

// Fallocate is fallocate(2). A file system that cannot preallocate (tmpfs on
// old kernels, some FUSE and network file systems) fails with EOPNOTSUPP; the
// error then also wraps ErrNotSupported so callers can fall back to Truncate.
func Fallocate(fd uintptr, mode uint32, off, length int64) error {
	for {
		err := unix.Fallocate(int(fd), mode, off, length)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return fmt.Errorf("%w: fallocate: %w", ErrNotSupported, err)
		default:
			return fmt.Errorf("fallocate: %w", err)
		}
	}
}

// Msync is msync(2) over b, which must start on a page boundary. With MS_SYNC
// Linux writes the range back and waits, through vfs_fsync_range with
// datasync semantics (mm/msync.c).
func Msync(b []byte, flags int) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.Msync(b, flags); err != nil {
		return fmt.Errorf("msync: %w", err)
	}
	return nil
}

// Fdatasync is fdatasync(2).
func Fdatasync(fd uintptr) error {
	for {
		err := unix.Fdatasync(int(fd))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("fdatasync: %w", err)
		}
		return nil
	}
}

// Madvise is madvise(2) over b, which must start on a page boundary.
func Madvise(b []byte, advice int) error {
	if len(b) == 0 {
		return nil
	}
	if err := unix.Madvise(b, advice); err != nil {
		return fmt.Errorf("madvise: %w", err)
	}
	return nil
}

// SeekData is lseek(2) with SEEK_DATA: the start of the first data region
// at or after off. ok is false when there is none (ENXIO). File systems
// without hole tracking report the whole file as data. On ext4 and xfs an
// unwritten (preallocated, never written) extent whose pages are not in the
// page cache counts as a hole.
func SeekData(fd uintptr, off int64) (pos int64, ok bool, err error) {
	return seek(fd, off, unix.SEEK_DATA)
}

// SeekHole is lseek(2) with SEEK_HOLE: the start of the first hole at or
// after off (the end of the file counts as a hole).
func SeekHole(fd uintptr, off int64) (pos int64, ok bool, err error) {
	return seek(fd, off, unix.SEEK_HOLE)
}

func seek(fd uintptr, off int64, whence int) (int64, bool, error) {
	pos, err := unix.Seek(int(fd), off, whence)
	switch {
	case errors.Is(err, unix.ENXIO):
		return 0, false, nil
	case errors.Is(err, unix.EINVAL):
		return 0, false, fmt.Errorf("%w: lseek whence %d: %w", ErrNotSupported, whence, err)
	case err != nil:
		return 0, false, fmt.Errorf("lseek: %w", err)
	}
	return pos, true, nil
}

// FreeBytes is statfs(2)'s space available to an unprivileged user on the
// file system holding path (f_bavail x f_bsize).
func FreeBytes(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// FileOwner is the user id that owns the file fi describes (from
// os.Stat or os.Lstat).
func FileOwner(fi os.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// TryLock takes an exclusive flock(2) on fd without waiting: false (and
// no error) when another open file description holds it. The kernel
// releases it when the holder closes the file or exits.
func TryLock(fd uintptr) (bool, error) {
	err := unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
