package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/edsrzf/mmap-go"

	"github.com/felixmq/felix/internal/linux"
)

// FS is the file system seam: every file operation of the package goes
// through it, so tests can inject faults (failed writes, syncs and
// preallocation, short writes, ENOSPC) and prove that nothing is reported
// durable that was not. OSFS is the real one.
type FS interface {
	// OpenFile opens name like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	// Rename renames oldpath to newpath like os.Rename (atomic within one
	// directory; WriteFileAtomic relies on it).
	Rename(oldpath, newpath string) error
	// ReadDir lists the names of the entries of dir.
	ReadDir(dir string) ([]string, error)
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes the entries of dir (creations, removals) durable.
	SyncDir(dir string) error
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Size() (int64, error)
	Truncate(size int64) error
	// Sync is fsync(2): data and metadata.
	Sync() error
	// SyncData is fdatasync(2) where the platform has it, else Sync.
	SyncData() error
	// Preallocate reserves blocks for [0, size) and sets the file size to
	// size (fallocate(2) mode 0), falling back to Truncate where the file
	// system cannot preallocate.
	Preallocate(size int64) error
	// Map maps [0, size) of the file shared and read-write.
	Map(size int) (Mapping, error)
	// DataEnd is the end of the last region at or after from that may hold
	// non-zero bytes, from SEEK_DATA/SEEK_HOLE; everything past it reads as
	// zeros. Where holes are not tracked it is the file size. A hint: it
	// lets recovery skip the never-written, preallocated tail of a segment
	// without faulting its pages in.
	DataEnd(from int64) (int64, error)
}

// Mapping is a shared read-write mapping of a file.
type Mapping interface {
	// Bytes is the mapped memory, valid until Unmap.
	Bytes() []byte
	// Sync writes [off, off+n) back to the file and waits (msync(2) MS_SYNC
	// on Linux, which is an fdatasync of that range; elsewhere a full flush
	// and fsync).
	Sync(off, n int64) error
	// Advise passes madvise(2) advice for [off, off+n); a hint, never fails
	// the caller.
	Advise(off, n int64, advice int)
	Unmap() error
}

// OSFS is the operating system's file system.
type OSFS struct{}

var _ FS = OSFS{}

// OpenFile implements FS.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// Rename implements FS.
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// MkdirAll implements FS.
func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// ReadDir implements FS.
func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

// SyncDir implements FS. Windows cannot fsync a directory handle; there it
// is a no-op (Windows is a vet target, not a supported broker platform).
func (OSFS) SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type osFile struct{ f *os.File }

func (o *osFile) ReadAt(b []byte, off int64) (int, error)  { return o.f.ReadAt(b, off) }
func (o *osFile) WriteAt(b []byte, off int64) (int, error) { return o.f.WriteAt(b, off) }
func (o *osFile) Close() error                             { return o.f.Close() }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o *osFile) Sync() error                              { return o.f.Sync() }

func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (o *osFile) SyncData() error {
	err := linux.Fdatasync(o.f.Fd())
	if errors.Is(err, linux.ErrNotSupported) {
		return o.f.Sync()
	}
	return err
}

// Preallocate uses fallocate mode 0, so the file size becomes size and the
// mapping never extends past EOF (which would SIGBUS). File systems without
// fallocate (tmpfs on old kernels: EOPNOTSUPP) get a sparse Truncate, which
// can fail later with SIGBUS on a full disk; that is the documented cost.
func (o *osFile) Preallocate(size int64) error {
	cur, err := o.Size()
	if err != nil {
		return err
	}
	if cur >= size {
		return nil
	}
	err = fallocate(o.f.Fd(), 0, cur, size-cur)
	if errors.Is(err, linux.ErrNotSupported) {
		return o.f.Truncate(size)
	}
	return err
}

func (o *osFile) DataEnd(from int64) (int64, error) {
	size, err := o.Size()
	if err != nil {
		return 0, err
	}
	return DataEnd(o.f, from, size), nil
}

// DataEnd returns the end of the last data region of f (size bytes long) at
// or after from, found with SEEK_DATA/SEEK_HOLE; where the file system does
// not track holes it returns size (all of it may be data). Recovery uses it
// to skip the never-written preallocated tail of an active segment; a File
// implementation outside this package can call it for the same answer.
func DataEnd(f *os.File, from, size int64) int64 {
	end := from
	for off := from; off < size; {
		d, ok, err := linux.SeekData(f.Fd(), off)
		if err != nil {
			return size
		}
		if !ok {
			break
		}
		h, ok, err := linux.SeekHole(f.Fd(), d)
		if err != nil || !ok {
			return size
		}
		end, off = h, h
	}
	return min(max(end, from), size)
}

func (o *osFile) Map(size int) (Mapping, error) {
	m, err := mmap.MapRegion(o.f, size, mmap.RDWR, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", o.f.Name(), err)
	}
	return &osMapping{m: m, f: o.f}, nil
}

type osMapping struct {
	m mmap.MMap
	f *os.File
}

func (m *osMapping) Bytes() []byte { return m.m }

func (m *osMapping) Sync(off, n int64) error {
	if n <= 0 {
		return nil
	}
	start := off &^ int64(pageSize-1) // msync wants a page-aligned start
	err := linux.Msync(m.m[start:off+n], linux.MS_SYNC)
	if errors.Is(err, linux.ErrNotSupported) {
		if err := m.m.Flush(); err != nil {
			return err
		}
		return m.f.Sync()
	}
	return err
}

func (m *osMapping) Advise(off, n int64, advice int) {
	start := off &^ int64(pageSize-1)
	_ = linux.Madvise(m.m[start:off+n], advice)
}

func (m *osMapping) Unmap() error { return m.m.Unmap() }

var pageSize = os.Getpagesize()

// fallocate is a variable so a test can take the fallback path.
var fallocate = linux.Fallocate
