package segment

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// spaceLedger is a Space with a limit that records what it holds.
type spaceLedger struct {
	mu    sync.Mutex
	held  int64
	limit int64
}

var errQuota = errors.New("quota")

func (s *spaceLedger) Reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held+n > s.limit {
		return errQuota
	}
	s.held += n
	return nil
}

func (s *spaceLedger) Release(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held -= n
}

func (s *spaceLedger) holding() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

func dirBytes(t *testing.T, dir string) int64 {
	var n int64
	for _, p := range segFiles(t, dir, "log") {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		n += fi.Size()
	}
	return n
}

// TestPreallocationFollowsNeed: a new segment preallocates
// InitialAllocBytes, not its roll size; the allocation doubles as records
// need it; a seal gives the unused tail back; Space is asked for every
// byte and told of every one given back, so what it holds is what the
// files hold.
func TestPreallocationFollowsNeed(t *testing.T) {
	for _, fd := range []bool{false, true} {
		t.Run(map[bool]string{false: "mapped", true: "fd"}[fd], func(t *testing.T) {
			dir := t.TempDir()
			space := &spaceLedger{limit: 1 << 30}
			l := openLog(t, dir, Config{SegmentBytes: 1 << 20, InitialAllocBytes: 64 << 10, Space: space, WriteMode: writeMode(fd)})
			require.EqualValues(t, 64<<10, dirBytes(t, dir), "a new log preallocates InitialAllocBytes")
			require.EqualValues(t, 64<<10, space.holding(), "a new log reserves its first step")
			base := int64(0)
			for i := range 120 {
				_, err := l.Append([][]byte{payload(i, 10<<10)}, int64(i))
				require.NoError(t, err)
				require.Equal(t, l.AllocatedBytes(), dirBytes(t, dir))
				require.Equal(t, l.AllocatedBytes()-base, space.holding())
				require.LessOrEqual(t, l.AllocatedBytes(), 2*int64(i+1)*(10<<10+RecordHeaderBytes)+2*SegmentHeaderBytes+(64<<10),
					"preallocation follows what is written")
			}
			require.NoError(t, l.Sync())
			require.Equal(t, 120, len(readAll(t, l, 0)))
			require.Positive(t, l.Stats().Rolls, "a seal gave its tail back")
		})
	}
}

// TestSpaceRefusalIsNotTerminal: when Space refuses, an append that needs
// more disk fails with ErrNoSpace (and the refusal); the log stays usable
// and takes appends again once Space allows, and everything acknowledged
// reads back.
func TestSpaceRefusalIsNotTerminal(t *testing.T) {
	dir := t.TempDir()
	space := &spaceLedger{limit: 100 << 10}
	l := openLog(t, dir, Config{SegmentBytes: 256 << 10, InitialAllocBytes: 32 << 10, Space: space})
	var appended int
	var err error
	for ; appended < 100; appended++ {
		if _, err = l.Append([][]byte{payload(appended, 8<<10)}, 1); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, ErrNoSpace)
	require.ErrorIs(t, err, errQuota)
	require.NoError(t, l.Err(), "not terminal")
	require.LessOrEqual(t, space.holding(), space.limit)
	space.mu.Lock()
	space.limit = 1 << 30
	space.mu.Unlock()
	_, err = l.Append([][]byte{payload(appended, 8<<10)}, 1)
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.Len(t, readAll(t, l, 0), appended+1)
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, Config{SegmentBytes: 256 << 10})
	require.Len(t, readAll(t, l2, 0), appended+1)
	require.Equal(t, l2.AllocatedBytes(), dirBytes(t, filepath.Clean(dir)))
}

// TestMustExistRefusesMissingLog: a log that was created before and whose
// directory, or whose every segment, is gone is refused with ErrMissing
// instead of being created again empty at its base offset; nothing is
// created on disk.
func TestMustExistRefusesMissingLog(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "shard")
	_, err := Open(dir, Config{MustExist: true})
	require.ErrorIs(t, err, ErrMissing)
	require.NoDirExists(t, dir)

	require.NoError(t, os.Mkdir(dir, 0o755))
	_, err = Open(dir, Config{MustExist: true})
	require.ErrorIs(t, err, ErrMissing, "a directory without segments")

	l := openLog(t, dir, Config{})
	_, err = l.Append([][]byte{[]byte("x")}, 1)
	require.NoError(t, err)
	require.NoError(t, l.Sync())
	require.NoError(t, l.Close())
	l2 := openLog(t, dir, Config{MustExist: true})
	require.Len(t, readAll(t, l2, 0), 1)
}

// openFiles counts this process's descriptors on files in dir (Linux).
func openFiles(t *testing.T, dir string) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("needs /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if filepath.Dir(target) == dir {
			n++
		}
	}
	return n
}

// TestSealedSegmentsHoldNoDescriptor: a log held one descriptor per
// retained segment, so a broker with enough segments hit RLIMIT_NOFILE (a
// roll then failed terminally and the logs could not be reopened). Sealed
// segments are now served by their mapping alone: a log holds one
// descriptor, its active segment's, after rolls and after a reopen, and
// still reads every record.
func TestSealedSegmentsHoldNoDescriptor(t *testing.T) {
	for _, fd := range []bool{false, true} {
		t.Run(map[bool]string{false: "mapped", true: "fd"}[fd], func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{SegmentBytes: 4096, WriteMode: writeMode(fd)}
			l := openLog(t, dir, cfg)
			for i := range 200 {
				_, err := l.Append([][]byte{payload(i, 500)}, 1)
				require.NoError(t, err)
				if i%7 == 0 {
					require.NoError(t, l.Sync())
				}
			}
			require.NoError(t, l.Sync())
			require.Greater(t, l.Stats().Segments, 20)
			require.Equal(t, 1, openFiles(t, dir))
			require.Len(t, readAll(t, l, 0), 200)
			require.NoError(t, l.Close())
			require.Zero(t, openFiles(t, dir))

			l2 := openLog(t, dir, cfg)
			require.Equal(t, 1, openFiles(t, dir))
			require.Len(t, readAll(t, l2, 0), 200)
		})
	}
}
