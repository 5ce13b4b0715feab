package segment

import (
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/linux"
)

// TestPreallocateFallsBackToTruncate: where fallocate reports
// ErrNotSupported (EOPNOTSUPP on tmpfs), segments are extended with
// Truncate and the log works the same.
func TestPreallocateFallsBackToTruncate(t *testing.T) {
	calls := 0
	saved := fallocate
	fallocate = func(fd uintptr, mode uint32, off, length int64) error {
		calls++
		return fmt.Errorf("%w: fallocate: operation not supported", linux.ErrNotSupported)
	}
	defer func() { fallocate = saved }()

	dir := t.TempDir()
	l := openLog(t, dir, Config{SegmentBytes: 4096})
	for i := range 20 {
		_, err := l.Append([][]byte{payload(i, 500)}, 1)
		require.NoError(t, err)
	}
	require.NoError(t, l.Sync())
	require.Positive(t, calls)
	fi, err := os.Stat(logPath(dir, l.mu.segs[len(l.mu.segs)-1].base))
	require.NoError(t, err)
	require.EqualValues(t, 4096, fi.Size())
	require.Len(t, readAll(t, l, 0), 20)
}

// TestDataEndSkipsPreallocatedTail: the never-written tail of a
// preallocated segment is reported as holes where the file system tracks
// them; either way DataEnd never cuts off written data.
func TestDataEndSkipsPreallocatedTail(t *testing.T) {
	dir := t.TempDir()
	f, err := OSFS{}.OpenFile(logPath(dir, 0), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Preallocate(8<<20))
	_, err = f.WriteAt([]byte("written"), 100)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	end, err := f.DataEnd(0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, end, int64(107))
	t.Logf("data end %d of %d bytes (SEEK_HOLE supported: %v)", end, 8<<20, end < 8<<20)
}
