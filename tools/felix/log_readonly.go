package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/edsrzf/mmap-go"

	"github.com/felixmq/felix/segment"
)

// openReadOnly opens the log in dir without changing a byte of it.
//
// segment has no read-only mode: Open recovers, and recovery repairs (cuts
// a torn tail, rewrites a bad index, extends the active segment, removes
// orphan indexes and never-installed segments). So the log is opened
// through readOnlyFS, which gives recovery private copy-on-write mappings
// (MAP_PRIVATE) and swallows every write, truncation, removal and sync,
// recording what Open would have changed. The opened log is then exactly
// what a broker would see after recovery, and the files are untouched.
// SegmentBytes is set to the minimum so that an active segment is never
// extended. The log must not be appended to.
func openReadOnly(dir string, verifyAll bool) (*segment.Log, *readOnlyFS, error) {
	files, err := segmentFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no segment files ({base_offset:020}.log) in %s", dir)
	}
	ro := &readOnlyFS{}
	_, statErr := os.Stat(filepath.Join(dir, "raft.state")) // replica.StateFile: a replica's log
	l, err := segment.Open(dir, segment.Config{
		SegmentBytes:    segment.SegmentHeaderBytes + segment.RecordHeaderBytes,
		VerifyAllOnOpen: verifyAll,
		FS:              ro,
		// A replica's log takes a batch in several appends: a tail that
		// ends inside one is what it received, not a torn write.
		KeepPartialBatches: statErr == nil,
	})
	if err != nil {
		return nil, nil, err
	}
	return l, ro, nil
}

// readOnlyFS is a segment.FS over the real files that never modifies them.
type readOnlyFS struct {
	mu struct {
		sync.Mutex
		changes []string        // what recovery would have done, in order
		written map[string]bool // files recovery would (re)write
	}
}

var _ segment.FS = (*readOnlyFS)(nil)

func (f *readOnlyFS) record(path string, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.changes = append(f.mu.changes, fmt.Sprintf(format, args...))
	if path != "" {
		if f.mu.written == nil {
			f.mu.written = map[string]bool{}
		}
		f.mu.written[filepath.Clean(path)] = true
	}
}

func (f *readOnlyFS) changes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.mu.changes)
}

func (f *readOnlyFS) rebuilt(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.written[filepath.Clean(path)]
}

// OpenFile opens existing files read-only; a file recovery would create or
// truncate (an index it rebuilds) becomes a sink that discards writes.
func (f *readOnlyFS) OpenFile(name string, flag int, _ os.FileMode) (segment.File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		f.record(name, "rewrite %s", name)
		return &sinkFile{}, nil
	}
	file, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return &readOnlyFile{f: file, fs: f}, nil
}

func (f *readOnlyFS) Remove(name string) error {
	f.record("", "remove %s", name)
	return nil
}

func (f *readOnlyFS) Rename(oldpath, newpath string) error {
	f.record(newpath, "rename %s to %s", oldpath, newpath)
	return nil
}

func (f *readOnlyFS) ReadDir(dir string) ([]string, error) {
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

func (f *readOnlyFS) MkdirAll(dir string, _ os.FileMode) error {
	fi, err := os.Stat(dir)
	if err == nil && !fi.IsDir() {
		err = fmt.Errorf("%s is not a directory", dir)
	}
	return err
}

func (f *readOnlyFS) SyncDir(string) error { return nil }

// readOnlyFile is an existing file opened O_RDONLY.
type readOnlyFile struct {
	f  *os.File
	fs *readOnlyFS
}

func (o *readOnlyFile) ReadAt(b []byte, off int64) (int, error) { return o.f.ReadAt(b, off) }
func (o *readOnlyFile) Close() error                            { return o.f.Close() }
func (o *readOnlyFile) Sync() error                             { return nil }
func (o *readOnlyFile) SyncData() error                         { return nil }

func (o *readOnlyFile) WriteAt(b []byte, off int64) (int, error) {
	o.fs.record(o.f.Name(), "write %d bytes to %s at byte %d", len(b), o.f.Name(), off)
	return len(b), nil
}

func (o *readOnlyFile) Truncate(size int64) error {
	o.fs.record(o.f.Name(), "truncate %s to %d bytes", o.f.Name(), size)
	return nil
}

func (o *readOnlyFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Preallocate is never needed to read (SegmentBytes is the minimum); a
// segment shorter than that is left as it is.
func (o *readOnlyFile) Preallocate(int64) error { return nil }

// Map maps the file privately: recovery may zero a torn tail in memory, the
// file never sees it. A mapping past the end of the file would fault, so it
// is refused beyond the file's last page.
func (o *readOnlyFile) Map(size int) (segment.Mapping, error) {
	fsize, err := o.Size()
	if err != nil {
		return nil, err
	}
	page := int64(os.Getpagesize())
	if int64(size) > (fsize+page-1)/page*page {
		return nil, fmt.Errorf("map %s: %d bytes past its end (%d bytes)", o.f.Name(), size, fsize)
	}
	m, err := mmap.MapRegion(o.f, size, mmap.COPY, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", o.f.Name(), err)
	}
	return &privateMapping{m: m, path: o.f.Name(), fs: o.fs}, nil
}

// DataEnd is the end of the last data region at or after from
// (SEEK_DATA/SEEK_HOLE), or the file size where holes are not tracked.
func (o *readOnlyFile) DataEnd(from int64) (int64, error) {
	size, err := o.Size()
	if err != nil {
		return 0, err
	}
	return segment.DataEnd(o.f, from, size), nil
}

type privateMapping struct {
	m    mmap.MMap
	path string
	fs   *readOnlyFS
}

func (m *privateMapping) Bytes() []byte { return m.m }

// Sync is where recovery would write a cut tail back; it records that.
func (m *privateMapping) Sync(off, n int64) error {
	if n > 0 {
		m.fs.record(m.path, "write back bytes [%d, %d) of %s", off, off+n, m.path)
	}
	return nil
}

func (m *privateMapping) Advise(int64, int64, int) {}
func (m *privateMapping) Unmap() error             { return m.m.Unmap() }

// sinkFile stands in for a file recovery would create or rewrite.
type sinkFile struct{}

func (sinkFile) ReadAt([]byte, int64) (int, error)      { return 0, io.EOF }
func (sinkFile) WriteAt(b []byte, _ int64) (int, error) { return len(b), nil }
func (sinkFile) Close() error                           { return nil }
func (sinkFile) Size() (int64, error)                   { return 0, nil }
func (sinkFile) Truncate(int64) error                   { return nil }
func (sinkFile) Sync() error                            { return nil }
func (sinkFile) SyncData() error                        { return nil }
func (sinkFile) Preallocate(int64) error                { return nil }
func (sinkFile) DataEnd(int64) (int64, error)           { return 0, nil }
func (sinkFile) Map(int) (segment.Mapping, error) {
	return nil, errors.New("felix log: a log directory without an installed segment cannot be read")
}
