package linux

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFallocateSetsSizeOrNotSupported proves mode 0 grows the file to the
// requested size, or the error says the caller must fall back.
func TestFallocateSetsSizeOrNotSupported(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	err = Fallocate(f.Fd(), 0, 0, 1<<20)
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("fallocate not supported here: %v", err)
	}
	require.NoError(t, err)
	fi, err := f.Stat()
	require.NoError(t, err)
	require.EqualValues(t, 1<<20, fi.Size())
}

// TestSyncCallsSucceedOrNotSupported proves the sync calls either work or
// report ErrNotSupported, never a silent success off Linux.
func TestSyncCallsSucceedOrNotSupported(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write([]byte("x"))
	require.NoError(t, err)
	err = Fdatasync(f.Fd())
	if Supported {
		require.NoError(t, err)
	} else {
		require.ErrorIs(t, err, ErrNotSupported)
	}
	require.NoError(t, Msync(nil, MS_SYNC))
	require.NoError(t, Madvise(nil, MADV_NORMAL))
}

// TestSeekDataFindsWrittenRegion: a file preallocated with fallocate and
// written only at the start reports data there; past the end there is none.
func TestSeekDataFindsWrittenRegion(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt([]byte("data"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	pos, ok, err := SeekData(f.Fd(), 0)
	if errors.Is(err, ErrNotSupported) {
		t.Skipf("no SEEK_DATA here: %v", err)
	}
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, pos)
	hole, ok, err := SeekHole(f.Fd(), 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.GreaterOrEqual(t, hole, int64(4))
	_, ok, err = SeekData(f.Fd(), 1<<20)
	require.NoError(t, err)
	require.False(t, ok, "no data past the end")
}
