package segment

import (
	"errors"
	"io"
	"runtime/debug"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/felixmq/felix/internal/invariants"
)

// TestReaderFollowsTailAcrossRolls: a reader at the tail sees records as
// they are appended, across rolls, without gaps or duplicates.
func TestReaderFollowsTailAcrossRolls(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 1024})
	r, err := l.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Next()
	require.ErrorIs(t, err, io.EOF)
	for i := range 30 {
		_, err := l.Append([][]byte{payload(i, 200)}, int64(i))
		require.NoError(t, err)
		rec, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, uint64(i), rec.Offset)
		require.Equal(t, payload(i, 200), rec.Payload)
		_, err = r.Next()
		require.ErrorIs(t, err, io.EOF)
	}
}

// TestConcurrentAppendSyncRead runs appenders, a syncer and readers at
// once (meaningful under -race): Durable only grows and never passes Next,
// and every reader sees a gapless prefix.
func TestConcurrentAppendSyncRead(t *testing.T) {
	for _, fd := range []bool{false, true} {
		l := openLog(t, t.TempDir(), Config{SegmentBytes: 8192, WriteMode: writeMode(fd)})
		const batches = 300
		var wg sync.WaitGroup
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				_, err := l.Append([][]byte{payload(i, 64), payload(i+1, 64)}, int64(i))
				if err != nil {
					t.Error(err)
					return
				}
			}
			close(done)
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := l.Sync(); err != nil {
					t.Error(err)
					return
				}
				d := l.Durable()
				if d < last || d > l.Next() {
					t.Errorf("durable %d after %d, next %d", d, last, l.Next())
				}
				last = d
			}
		}()
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := l.NewReader(0)
				if err != nil {
					t.Error(err)
					return
				}
				defer r.Close()
				for want := uint64(0); want < 2*batches; {
					rec, err := r.Next()
					if errors.Is(err, io.EOF) {
						continue
					}
					if err != nil || rec.Offset != want {
						t.Errorf("got %d err %v, want %d", rec.Offset, err, want)
						return
					}
					want++
				}
			}()
		}
		wg.Wait()
		require.NoError(t, l.Sync())
		require.Equal(t, l.Next(), l.Durable())
	}
}

// TestPayloadAfterReaderCloseFaults proves the lifetime rule: once the last
// reference goes the mapping is gone, so a payload kept past Close faults
// instead of silently reading reused memory. Under invariants the Reader
// itself also panics when used after Close.
func TestPayloadAfterReaderCloseFaults(t *testing.T) {
	l := openLog(t, t.TempDir(), Config{SegmentBytes: 1 << 20})
	_, err := l.Append([][]byte{payload(1, 64)}, 1)
	require.NoError(t, err)
	r, err := l.NewReader(0)
	require.NoError(t, err)
	rec, err := r.Next()
	require.NoError(t, err)
	require.NoError(t, l.Close()) // the reader now holds the only reference
	require.NoError(t, r.Close())

	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	require.Panics(t, func() { faultSink = rec.Payload[0] }, "payload read after the last release must fault")
	if invariants.Enabled {
		require.PanicsWithValue(t, "segment: Reader used after Close", func() { _, _ = r.Next() })
	} else {
		_, err = r.Next()
		require.ErrorIs(t, err, ErrClosed)
	}
}

var faultSink byte
