package segment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// faultFS wraps OSFS and consults fault before every operation: a non-nil
// error fails the operation (before it happens), errShortWrite makes a
// WriteAt write half and report success for the half.
type faultFS struct {
	inner OSFS
	mu    sync.Mutex
	fault func(op, path string) error
	// noSync makes every sync a successful no-op: for fuzzing, where
	// durability is not under test and fsync latency dominates.
	noSync bool
}

var errSkip = errors.New("skip the real operation")

var (
	errInjected   = errors.New("injected fault")
	errNoSpace    = fmt.Errorf("%w (injected)", syscall.ENOSPC)
	errShortWrite = errors.New("short write")
)

func (f *faultFS) check(op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.noSync && (op == "sync" || op == "syncdata" || op == "syncdir" || op == "msync") {
		return errSkip
	}
	if f.fault == nil {
		return nil
	}
	return f.fault(op, filepath.Base(path))
}

func (f *faultFS) set(fn func(op, path string) error) {
	f.mu.Lock()
	f.fault = fn
	f.mu.Unlock()
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := f.check("open", name); err != nil {
		return nil, err
	}
	file, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, name: name}, nil
}

func (f *faultFS) Remove(name string) error {
	if err := f.check("remove", name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if err := f.check("rename", oldpath); err != nil {
		return err
	}
	return f.inner.Rename(oldpath, newpath)
}

func (f *faultFS) ReadDir(dir string) ([]string, error) { return f.inner.ReadDir(dir) }
func (f *faultFS) MkdirAll(dir string, perm os.FileMode) error {
	return f.inner.MkdirAll(dir, perm)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.check("syncdir", dir); err != nil {
		return skipped(err)
	}
	return f.inner.SyncDir(dir)
}

type faultFile struct {
	File
	fs   *faultFS
	name string
}

func (f *faultFile) WriteAt(b []byte, off int64) (int, error) {
	switch err := f.fs.check("write", f.name); {
	case errors.Is(err, errShortWrite):
		return f.File.WriteAt(b[:len(b)/2], off)
	case err != nil:
		return 0, err
	}
	return f.File.WriteAt(b, off)
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.check("truncate", f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Sync() error {
	if err := f.fs.check("sync", f.name); err != nil {
		return skipped(err)
	}
	return f.File.Sync()
}

func (f *faultFile) SyncData() error {
	if err := f.fs.check("syncdata", f.name); err != nil {
		return skipped(err)
	}
	return f.File.SyncData()
}

func (f *faultFile) Preallocate(size int64) error {
	if err := f.fs.check("preallocate", f.name); err != nil {
		return err
	}
	return f.File.Preallocate(size)
}

func (f *faultFile) Map(size int) (Mapping, error) {
	if err := f.fs.check("map", f.name); err != nil {
		return nil, err
	}
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	return &faultMapping{Mapping: m, f: f}, nil
}

type faultMapping struct {
	Mapping
	f *faultFile
}

func (m *faultMapping) Sync(off, n int64) error {
	if err := m.f.fs.check("msync", m.f.name); err != nil {
		return skipped(err)
	}
	if err := m.Mapping.Sync(off, n); err != nil {
		return err
	}
	return m.f.fs.check("msynced", m.f.name) // a hook after the write-back
}

func skipped(err error) error {
	if errors.Is(err, errSkip) {
		return nil
	}
	return err
}

// failOn returns a fault function failing op (on any file) with err.
func failOn(op string, err error) func(string, string) error {
	return func(o, _ string) error {
		if o == op {
			return err
		}
		return nil
	}
}

// TestFailedSyncIsTerminal: after a failed sync the log accepts no appends,
// every later Sync fails too, and Durable never covers the unsynced records.
func TestFailedSyncIsTerminal(t *testing.T) {
	for _, tc := range []struct {
		name string
		fd   bool
		op   string
	}{{"mapped msync", false, "msync"}, {"fd fdatasync", true, "syncdata"}} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := &faultFS{}
			l := openLog(t, t.TempDir(), Config{SegmentBytes: 1 << 16, FS: fsys, WriteMode: writeMode(tc.fd)})
			_, err := l.Append([][]byte{[]byte("a")}, 1)
			require.NoError(t, err)
			require.NoError(t, l.Sync())
			require.Equal(t, uint64(1), l.Durable())

			_, err = l.Append([][]byte{[]byte("b"), []byte("c")}, 1)
			require.NoError(t, err)
			fsys.set(failOn(tc.op, errInjected))
			err = l.Sync()
			require.ErrorIs(t, err, ErrLogFailed)
			require.ErrorIs(t, err, errInjected)
			require.Equal(t, uint64(1), l.Durable(), "nothing reported synced that was not")

			fsys.set(nil) // even when the disk "recovers", the log stays failed
			_, err = l.Append([][]byte{[]byte("d")}, 1)
			require.ErrorIs(t, err, ErrLogFailed)
			require.ErrorIs(t, l.Sync(), ErrLogFailed)
			require.Equal(t, uint64(1), l.Durable())
			st := l.Stats()
			require.True(t, st.Failed)
			require.Equal(t, uint64(1), st.SyncErrors)
		})
	}
}

// TestFailedSealOrRollIsTerminal injects each failure a roll can meet, in
// both write modes.
func TestFailedSealOrRollIsTerminal(t *testing.T) {
	for _, fd := range []bool{false, true} {
		writeBack := map[bool]string{false: "msync", true: "syncdata"}[fd]
		for _, tc := range []struct {
			name  string
			fault func(op, path string) error
		}{
			{"write back of the old segment", failOn(writeBack, errInjected)},
			{"truncate of the old segment", failOn("truncate", errInjected)},
			{"fsync of the old segment", failOn("sync", errInjected)},
			{"preallocate of the new segment", failOn("preallocate", errInjected)},
			{"directory fsync", failOn("syncdir", errInjected)},
			{"mapping the new segment", failOn("map", errInjected)},
		} {
			t.Run(writeMode(fd).String()+"/"+tc.name, func(t *testing.T) {
				fsys := &faultFS{}
				l := openLog(t, t.TempDir(), Config{SegmentBytes: 1024, FS: fsys, WriteMode: writeMode(fd)})
				_, err := l.Append([][]byte{payload(1, 600)}, 1)
				require.NoError(t, err)
				fsys.set(tc.fault)
				_, err = l.Append([][]byte{payload(2, 600)}, 1) // needs a roll
				require.ErrorIs(t, err, ErrLogFailed)
				// A failure after the seal leaves the sealed (synced)
				// segment durable; one in the seal leaves nothing durable.
				afterSeal := strings.Contains(tc.name, "new segment") || tc.name == "directory fsync"
				require.Equal(t, map[bool]uint64{false: 0, true: 1}[afterSeal], l.Durable())
				fsys.set(nil)
				_, err = l.Append([][]byte{[]byte("x")}, 1)
				require.ErrorIs(t, err, ErrLogFailed, "terminal")
				require.ErrorIs(t, l.Sync(), ErrLogFailed)
				require.Equal(t, uint64(1), l.Next())
				require.Len(t, readAll(t, l, 0), 1, "what was appended stays readable")
			})
		}
	}
}

// TestNoSpaceAtSealIsRetried: a seal that meets a full disk after the
// data is written back behaves like a roll that finds no space for the
// next segment: that append fails with ErrNoSpace, the log stays usable,
// and the seal is done again once space returns. An index that cannot be
// written (no space, a short write) does not stop the seal: the index is a
// hint the next open rebuilds. Before, both were terminal until restart.
func TestNoSpaceAtSealIsRetried(t *testing.T) {
	index := func(fault error) func(op, p string) error {
		return func(op, p string) error {
			if op == "write" && filepath.Ext(p) == ".index" {
				return fault
			}
			return nil
		}
	}
	for _, fd := range []bool{false, true} {
		for _, tc := range []struct {
			name    string
			fault   func(op, path string) error
			refused bool // the append that needs the roll fails
		}{
			{"truncate ENOSPC", failOn("truncate", errNoSpace), true},
			{"fsync ENOSPC", func(op, p string) error {
				if op == "sync" && filepath.Ext(p) == ".log" {
					return errNoSpace
				}
				return nil
			}, true},
			{"index write ENOSPC", index(errNoSpace), false},
			{"index short write", index(errShortWrite), false},
		} {
			t.Run(writeMode(fd).String()+"/"+tc.name, func(t *testing.T) {
				dir := t.TempDir()
				fsys := &faultFS{}
				cfg := Config{SegmentBytes: 1024, FS: fsys, WriteMode: writeMode(fd)}
				l := openLog(t, dir, cfg)
				_, err := l.Append([][]byte{payload(0, 600)}, 1)
				require.NoError(t, err)
				fsys.set(tc.fault)
				_, err = l.Append([][]byte{payload(1, 600)}, 1) // needs a roll
				if tc.refused {
					require.ErrorIs(t, err, ErrNoSpace)
					require.ErrorIs(t, err, syscall.ENOSPC, "the cause is kept")
					require.NoError(t, l.Err(), "not terminal")
					fsys.set(nil) // space returns
					_, err = l.Append([][]byte{payload(1, 600)}, 1)
				}
				require.NoError(t, err)
				fsys.set(nil)
				require.NoError(t, l.Sync())
				require.Len(t, readAll(t, l, 0), 2)
				require.NoError(t, l.Close())

				l2 := openLog(t, dir, Config{SegmentBytes: 1024, WriteMode: writeMode(fd)})
				require.Equal(t, []Record{{Offset: 0, TimestampMicros: 1, Payload: payload(0, 600)},
					{Offset: 1, TimestampMicros: 1, Payload: payload(1, 600)}}, readAll(t, l2, 0))
			})
		}
	}
}

// TestNoSpaceForNewSegmentIsRetried: a roll that finds no space for the
// next segment fails that append with ErrNoSpace and nothing else; the full
// segment is sealed (and so durable), the next appends retry the roll, and
// once space returns the log goes on and reopens intact.
func TestNoSpaceForNewSegmentIsRetried(t *testing.T) {
	for _, fd := range []bool{false, true} {
		t.Run(writeMode(fd).String(), func(t *testing.T) {
			dir := t.TempDir()
			fsys := &faultFS{}
			cfg := Config{SegmentBytes: 1024, FS: fsys, WriteMode: writeMode(fd)}
			l := openLog(t, dir, cfg)
			_, err := l.Append([][]byte{payload(0, 600)}, 1)
			require.NoError(t, err)
			fsys.set(failOn("preallocate", errNoSpace))
			for range 2 {
				_, err = l.Append([][]byte{payload(1, 600)}, 1)
				require.ErrorIs(t, err, ErrNoSpace)
				require.NotErrorIs(t, err, ErrLogFailed)
				require.ErrorIs(t, err, syscall.ENOSPC, "the cause is kept")
			}
			require.NoError(t, l.Err())
			require.Equal(t, uint64(1), l.Next())
			require.Equal(t, uint64(1), l.Durable(), "the sealed segment is durable")
			require.EqualValues(t, 2, l.Stats().NoSpace)
			require.NoError(t, l.Sync())

			fsys.set(nil) // space returns
			off, err := l.Append([][]byte{payload(1, 600)}, 1)
			require.NoError(t, err)
			require.Equal(t, uint64(1), off)
			require.NoError(t, l.Sync())
			require.Len(t, readAll(t, l, 0), 2)
			require.NoError(t, l.Close())

			l2 := openLog(t, dir, Config{SegmentBytes: 1024, WriteMode: writeMode(fd)})
			got := readAll(t, l2, 0)
			require.Len(t, got, 2)
			require.Equal(t, payload(1, 600), got[1].Payload)
		})
	}
}

// TestFailedFDWriteIsTerminal covers ENOSPC and short writes on the
// pwrite path.
func TestFailedFDWriteIsTerminal(t *testing.T) {
	for name, ferr := range map[string]error{"enospc": errNoSpace, "short": errShortWrite} {
		t.Run(name, func(t *testing.T) {
			fsys := &faultFS{}
			l := openLog(t, t.TempDir(), Config{SegmentBytes: 1 << 16, FS: fsys, WriteMode: WriteModeFD})
			fsys.set(failOn("write", ferr))
			_, err := l.Append([][]byte{[]byte("abc")}, 1)
			require.ErrorIs(t, err, ErrLogFailed)
			require.Equal(t, uint64(0), l.Next(), "a failed batch gets no offsets")
			fsys.set(nil)
			_, err = l.Append([][]byte{[]byte("abc")}, 1)
			require.ErrorIs(t, err, ErrLogFailed)
		})
	}
}

// TestOpenFailsCleanlyOnPreallocateError: no log, no leaked descriptor.
func TestOpenFailsCleanlyOnPreallocateError(t *testing.T) {
	fsys := &faultFS{}
	fsys.set(failOn("preallocate", errNoSpace))
	_, err := Open(t.TempDir(), Config{SegmentBytes: 4096, FS: fsys})
	require.ErrorIs(t, err, errNoSpace)
}
